// PeerInfo::deserialize on the records the rendezvous hands out, then, when
// every record is accepted, buildTopology over them (what Comm::init does
// with the table).
//
// Input: byte 0 = number of records (1..24); byte 1 = a size change for the
// last record (mostly none); then the records, sizeof(PeerInfo) bytes each
// (zero-filled when the input ends). Record r is expected to say rank r.
//
// Oracle: a record is refused only with hetcclRemoteError and only if its
// size, rank or string terminators are wrong; an accepted one re-serializes
// to the same bytes. The topology puts every rank in exactly one group, in
// ascending order inside it, groups ordered by their lowest rank, one device
// kind per group, at most HETCCL_MAX_GROUPS groups; otherwise it refuses with
// hetcclInvalidUsage.
#include <set>
#include <string>

#include "topology/groups.h"
#include "topology/peer.h"
#include "fuzz_util.h"

using namespace hetccl;
using namespace fuzz;

namespace {

bool terminated(const char* s, size_t n) { return memchr(s, 0, n) != nullptr; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const int n = 1 + in.byte() % 24;
  const uint8_t resize = in.byte();
  std::vector<PeerInfo> peers;
  for (int r = 0; r < n; ++r) {
    std::vector<uint8_t> rec = in.bytes(sizeof(PeerInfo));
    rec.resize(sizeof(PeerInfo), 0);
    if (r == n - 1 && resize >= 0xf0) rec.resize(sizeof(PeerInfo) + (resize & 0xf) - 8);  // -8..+7 bytes
    PeerInfo p;
    try {
      p = PeerInfo::deserialize(rec, r);
    } catch (const Error& e) {
      FUZZ_CHECK_MSG(e.code() == hetcclRemoteError, e.what());
      note("record refused");
      if (rec.size() == sizeof(PeerInfo)) {
        PeerInfo raw;
        memcpy(&raw, rec.data(), sizeof(raw));
        FUZZ_CHECK(raw.rank != r || !terminated(raw.hostname, sizeof(raw.hostname)) ||
                   !terminated(raw.deviceKind, sizeof(raw.deviceKind)) || !terminated(raw.group, sizeof(raw.group)) ||
                   !terminated(raw.site, sizeof(raw.site)));
      }
      return 0;
    }
    FUZZ_CHECK(rec.size() == sizeof(PeerInfo));
    FUZZ_CHECK(p.rank == r);
    FUZZ_CHECK(terminated(p.hostname, sizeof(p.hostname)) && terminated(p.deviceKind, sizeof(p.deviceKind)) &&
               terminated(p.group, sizeof(p.group)) && terminated(p.site, sizeof(p.site)));
    FUZZ_CHECK(p.serialize() == rec);
    peers.push_back(p);
  }

  Topology t;
  try {
    t = buildTopology(peers);
  } catch (const Error& e) {
    FUZZ_CHECK_MSG(e.code() == hetcclInvalidUsage, e.what());
    std::set<std::string> names;
    bool mixed = false;
    for (const PeerInfo& p : peers) {
      names.insert(p.group);
      for (const PeerInfo& q : peers)
        if (std::string(p.group) == q.group && std::string(p.deviceKind) != q.deviceKind) mixed = true;
    }
    FUZZ_CHECK(mixed || names.size() > HETCCL_MAX_GROUPS);
    note("topology refused");
    return 0;
  }
  FUZZ_CHECK(t.ngroups() >= 1 && t.ngroups() <= HETCCL_MAX_GROUPS);
  FUZZ_CHECK(t.groupOf.size() == peers.size() && t.groupRank.size() == peers.size());
  std::set<int> seen;
  int lastLowest = -1;
  for (int g = 0; g < t.ngroups(); ++g) {
    const Group& grp = t.groups[g];
    FUZZ_CHECK(!grp.ranks.empty());
    FUZZ_CHECK(grp.ranks[0] > lastLowest);
    lastLowest = grp.ranks[0];
    for (size_t i = 0; i < grp.ranks.size(); ++i) {
      int r = grp.ranks[i];
      FUZZ_CHECK(r >= 0 && r < n);
      FUZZ_CHECK(i == 0 || r > grp.ranks[i - 1]);
      FUZZ_CHECK(seen.insert(r).second);
      FUZZ_CHECK(t.groupOf[r] == g && t.groupRank[r] == static_cast<int>(i));
      FUZZ_CHECK(grp.name == peers[r].group && grp.deviceKind == peers[r].deviceKind);
    }
  }
  FUZZ_CHECK(static_cast<int>(seen.size()) == n);
  bool oneHost = true;
  for (const PeerInfo& p : peers) oneHost = oneHost && p.hostHash == peers[0].hostHash;
  FUZZ_CHECK(t.singleHost == oneHost);
  std::string text = describeTopology(t);
  FUZZ_CHECK(!text.empty());
  note(t.ngroups() > 1 ? "topology built, several groups" : "topology built, one group");
  return 0;
}
