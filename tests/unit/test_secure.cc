// secure/: HKDF and AES-256-GCM against published answers, the record
// stream against every way a relay can attack it (flip, replay, reorder,
// drop, truncate, resize), rekeying, and which links a rank encrypts.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "comm/link_security.h"
#include "secure/aead.h"
#include "secure/message_cipher.h"
#include "secure/record.h"
#include "transport/tcp/tcp_transport.h"
#include "unit_util.h"

namespace hetccl {
namespace {

using secure::Aes256Gcm;

std::vector<uint8_t> hex(const std::string& h) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < h.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

TEST(Crypto, HkdfSha256MatchesRfc5869CaseOne) {
  std::vector<uint8_t> ikm(22, 0x0b), salt = hex("000102030405060708090a0b0c"), out(42);
  std::string info;
  for (uint8_t c : hex("f0f1f2f3f4f5f6f7f8f9")) info.push_back(static_cast<char>(c));
  secure::hkdfSha256(ikm, salt, info, out);
  EXPECT_EQ(out, hex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"));
}

TEST(Crypto, AesGcmMatchesPublishedVectorsAndRejectsAnyChange) {
  // The GCM specification's test cases 13 and 14: a zero key and IV.
  std::array<uint8_t, 32> key{};
  uint8_t iv[12] = {0}, tag[16];
  Aes256Gcm enc(key, true), dec(key, false);
  enc.seal(iv, {}, {}, nullptr, tag);
  EXPECT_EQ(std::vector<uint8_t>(tag, tag + 16), hex("530f8afbc74536b9a963b4f1c4cb738b"));
  uint8_t zeros[16] = {0}, ct[16];
  Aes256Gcm::Piece p{zeros, 16};
  enc.seal(iv, {}, {&p, 1}, ct, tag);
  EXPECT_EQ(std::vector<uint8_t>(ct, ct + 16), hex("cea7403d4d606b6e074ec5d3baf39d18"));
  EXPECT_EQ(std::vector<uint8_t>(tag, tag + 16), hex("d0d1c8a799996bf0265b98b5d48ab919"));
  uint8_t back[16];
  EXPECT_TRUE(dec.open(iv, {}, ct, 16, back, tag));
  EXPECT_EQ(memcmp(back, zeros, 16), 0);
  ct[5] ^= 1;
  EXPECT_FALSE(dec.open(iv, {}, ct, 16, back, tag));
}

secure::LinkKeys testKeys() {
  std::vector<uint8_t> secret(32, 7), nonces(32, 9);
  return secure::deriveLinkKeys(secret, nonces, "unit test");
}

// Records as the sender makes them: message i holds bytes i*31+j.
std::vector<std::vector<uint8_t>> sealRecords(int n, size_t len, uint64_t rekey = secure::kDefaultRekeyRecords) {
  secure::RecordSealer s(testKeys().client, rekey);
  std::vector<std::vector<uint8_t>> out;
  for (int i = 0; i < n; ++i) {
    std::vector<uint8_t> plain(len);
    for (size_t j = 0; j < len; ++j) plain[j] = static_cast<uint8_t>(i * 31 + j);
    Aes256Gcm::Piece p{plain.data(), plain.size()};
    std::vector<uint8_t> rec(len + secure::kRecordOverhead);
    EXPECT_EQ(s.seal({&p, 1}, rec.data()), rec.size());
    out.push_back(rec);
  }
  return out;
}

// Feeds a stream to an opener in pieces of `step` bytes; returns the
// plaintext, or throws as the opener does.
std::vector<uint8_t> openStream(const std::vector<uint8_t>& wire, size_t step = 7,
                                uint64_t rekey = secure::kDefaultRekeyRecords) {
  secure::RecordOpener o(testKeys().client, "test peer", rekey);
  std::vector<uint8_t> plain;
  size_t at = 0;
  while (at < wire.size()) {
    auto room = o.space();
    size_t n = std::min({room.size(), step, wire.size() - at});
    memcpy(room.data(), wire.data() + at, n);
    at += n;
    o.filled(n);
    // Whole records straight into the destination where they fit (every
    // other record), else through plain().
    std::vector<uint8_t> direct(secure::kMaxRecordPlain);
    if (size_t k = (o.records() % 2) ? o.openInto(direct.data(), direct.size()) : 0) {
      plain.insert(plain.end(), direct.begin(), direct.begin() + k);
      continue;
    }
    auto p = o.plain();
    plain.insert(plain.end(), p.begin(), p.end());
    o.consume(p.size());
  }
  if (o.midRecord()) throwError(hetcclRemoteError, "stream ends inside a record");
  return plain;
}

std::vector<uint8_t> join(const std::vector<std::vector<uint8_t>>& recs) {
  std::vector<uint8_t> w;
  for (const auto& r : recs) w.insert(w.end(), r.begin(), r.end());
  return w;
}

TEST(Records, RoundTripInAnyPiecesAcrossRekeys) {
  for (uint64_t rekey : {uint64_t{1}, uint64_t{3}, secure::kDefaultRekeyRecords}) {
    auto recs = sealRecords(10, 1000, rekey);
    for (size_t step : {size_t{1}, size_t{13}, size_t{1 << 20}}) {
      std::vector<uint8_t> plain = openStream(join(recs), step, rekey);
      ASSERT_EQ(plain.size(), 10000u);
      for (int i = 0; i < 10; ++i)
        for (size_t j = 0; j < 1000; j += 97) ASSERT_EQ(plain[i * 1000 + j], static_cast<uint8_t>(i * 31 + j));
    }
  }
  // Keys change with the rekey: the same stream under another schedule fails.
  EXPECT_HETCCL_ERROR(openStream(join(sealRecords(5, 64, 2)), 7, 3), hetcclRemoteError, "failed authentication");
}

TEST(Records, EveryAttackOfARelayFailsNamingThePeer) {
  auto recs = sealRecords(4, 300);
  // Every single bit of the first record, flipped, is caught.
  for (size_t byte = 0; byte < recs[0].size(); ++byte) {
    auto bad = recs;
    bad[0][byte] ^= static_cast<uint8_t>(1u << (byte % 8));
    auto err = test::catchError([&] { openStream(join(bad)); });
    ASSERT_TRUE(err) << "flip at byte " << byte << " went unnoticed";
    EXPECT_EQ(err->code(), hetcclRemoteError);
    EXPECT_TRUE(test::contains(err->what(), "test peer")) << err->what();
  }
  auto replay = recs;
  replay.insert(replay.begin() + 2, recs[1]);
  EXPECT_HETCCL_ERROR(openStream(join(replay)), hetcclRemoteError, "record 2 failed authentication");
  auto reorder = recs;
  std::swap(reorder[1], reorder[2]);
  EXPECT_HETCCL_ERROR(openStream(join(reorder)), hetcclRemoteError, "record 1 failed authentication");
  auto drop = recs;
  drop.erase(drop.begin() + 1);
  EXPECT_HETCCL_ERROR(openStream(join(drop)), hetcclRemoteError, "record 1 failed authentication");
  auto cut = join(recs);
  cut.resize(cut.size() - 5);
  EXPECT_HETCCL_ERROR(openStream(cut), hetcclRemoteError, "inside a record");
  // A length beyond the largest record is refused before its body is awaited.
  auto huge = recs;
  huge[0][3] = 0x7f;
  EXPECT_HETCCL_ERROR(openStream(join(huge)), hetcclRemoteError, "announces");
  // The other direction's key (a reflected stream) does not open.
  secure::RecordOpener other(testKeys().server, "test peer");
  auto room = other.space();
  memcpy(room.data(), recs[0].data(), 4);
  other.filled(4);
  room = other.space();
  memcpy(room.data(), recs[0].data() + 4, room.size());
  other.filled(room.size());
  EXPECT_HETCCL_ERROR(other.plain(), hetcclRemoteError, "failed authentication");
}

// Records sealed on several threads at once are the records one thread
// seals (the same counters, keys and rekeys), and an opener that reads
// several records ahead opens them on several threads into one buffer.
TEST(Records, SealedAndOpenedInParallelAsInSequence) {
  for (uint64_t rekey : {uint64_t{2}, uint64_t{5}, secure::kDefaultRekeyRecords}) {
    SCOPED_TRACE("rekey " + std::to_string(rekey));
    const size_t lens[] = {1, 64 * 1024, 1000, secure::kMaxRecordPlain, 7, 300000 - 262144, 5000, 12, 99999};
    std::vector<std::vector<uint8_t>> plains;
    for (size_t i = 0; i < std::size(lens); ++i) {
      plains.emplace_back(lens[i]);
      for (size_t j = 0; j < lens[i]; ++j) plains.back()[j] = static_cast<uint8_t>(i * 13 + j * 7);
    }
    std::vector<uint8_t> sequential;
    secure::RecordSealer one(testKeys().client, rekey);
    for (const auto& p : plains) {
      Aes256Gcm::Piece piece{p.data(), p.size()};
      std::vector<uint8_t> rec(p.size() + secure::kRecordOverhead);
      one.seal({&piece, 1}, rec.data());
      sequential.insert(sequential.end(), rec.begin(), rec.end());
    }
    // The same records in batches of 4 and 5, on 4 threads, each record's
    // plaintext in two pieces.
    secure::RecordSealer many(testKeys().client, rekey);
    std::vector<uint8_t> parallel(sequential.size());
    size_t at = 0;
    for (size_t first = 0; first < plains.size();) {
      std::vector<secure::PlainRecord> batch;
      for (size_t i = first; i < std::min(plains.size(), first + (first ? 5 : 4)); ++i) {
        secure::PlainRecord r;
        const size_t cut = plains[i].size() / 3;
        r.piece[0] = {plains[i].data(), cut};
        r.piece[1] = {plains[i].data() + cut, plains[i].size() - cut};
        batch.push_back(r);
      }
      at += many.sealAll(batch, parallel.data() + at, 4);
      first += batch.size();
    }
    ASSERT_EQ(at, parallel.size());
    EXPECT_TRUE(parallel == sequential) << "records sealed on 4 threads differ from those sealed on one";
    EXPECT_EQ(many.records(), plains.size());

    // An opener holding up to 4 records, fed in pieces of 100 000 bytes,
    // opens every run of whole records that fits into one buffer.
    secure::RecordOpener o(testKeys().client, "test peer", rekey, 4);
    std::vector<uint8_t> got, dst(3 * secure::kMaxRecordPlain);
    size_t fed = 0, batches = 0, biggest = 0;
    while (got.size() < sequential.size() - plains.size() * secure::kRecordOverhead) {
      auto room = o.space();
      size_t n = std::min({room.size(), size_t{100000}, sequential.size() - fed});
      memcpy(room.data(), sequential.data() + fed, n);
      fed += n;
      o.filled(n);
      const uint64_t before = o.records();
      if (size_t k = o.openInto(dst.data(), dst.size(), 3)) {
        got.insert(got.end(), dst.begin(), dst.begin() + k);
        ++batches;
        biggest = std::max<size_t>(biggest, o.records() - before);
      } else if (n == 0) {
        auto p = o.plain();  // the next record is larger than what is left of dst: never here
        ASSERT_FALSE(p.empty()) << "stuck with " << o.records() << " records opened";
        got.insert(got.end(), p.begin(), p.end());
        o.consume(p.size());
      }
    }
    EXPECT_FALSE(o.midRecord());
    std::vector<uint8_t> want;
    for (const auto& p : plains) want.insert(want.end(), p.begin(), p.end());
    EXPECT_TRUE(got == want) << "plaintext differs after " << batches << " batches";
    EXPECT_GT(biggest, 1u) << "no call opened more than one record";
  }
}

// A batch opened on several threads in which two records were altered fails
// naming the first of them, and nothing of the batch is delivered.
TEST(Records, ParallelOpenNamesTheFirstBadRecord) {
  auto recs = sealRecords(6, 5000);
  recs[4][100] ^= 1;
  recs[2][50] ^= 1;
  auto wire = join(recs);
  secure::RecordOpener o(testKeys().client, "test peer", secure::kDefaultRekeyRecords, 8);
  auto room = o.space();
  ASSERT_GE(room.size(), wire.size());
  memcpy(room.data(), wire.data(), wire.size());
  o.filled(wire.size());
  std::vector<uint8_t> dst(6 * 5000);
  EXPECT_HETCCL_ERROR(o.openInto(dst.data(), dst.size(), 4), hetcclRemoteError, "record 2 failed authentication");
}

TEST(Records, KeysDifferByDirectionPurposeAndNonce) {
  std::vector<uint8_t> secret(32, 7), n1(32, 9), n2(32, 9);
  n2[31] = 10;
  auto a = secure::deriveLinkKeys(secret, n1, "x"), b = secure::deriveLinkKeys(secret, n2, "x"),
       c = secure::deriveLinkKeys(secret, n1, "y");
  EXPECT_NE(a.client.key, a.server.key);
  EXPECT_NE(a.client.key, b.client.key);
  EXPECT_NE(a.client.key, c.client.key);
  EXPECT_EQ(a.client.key, secure::deriveLinkKeys(secret, n1, "x").client.key);
}

// Which links a rank encrypts, from the peers' records: every rank alike.
std::vector<PeerInfo> fourRanks(const char* sites[4], const uint64_t hosts[4]) {
  std::vector<PeerInfo> p(4);
  for (int r = 0; r < 4; ++r) {
    p[r].rank = r;
    p[r].hostHash = hosts[r];
    snprintf(p[r].site, sizeof(p[r].site), "%s", sites[r]);
  }
  return p;
}

// Messages sealed by place (the ucx transport's parts, which arrive in any
// order): a part opens wherever it is opened from, in any order and on any
// number of threads, but only as the message, part and length it was sealed
// as, and across key changes (a new key every 3 messages here).
TEST(MessageCipher, PartsOpenInAnyOrderOnlyAtTheirPlace) {
  secure::requireCrypto();
  const secure::LinkKeys keys = testKeys();
  secure::MessageCipher tx(keys.client, true, 3), rx(keys.client, false, 3);
  const size_t n = 3 * secure::kMaxRecordPlain + 1000;  // four records, the last short
  struct Part {
    uint64_t msg;
    uint32_t part;
    std::vector<uint8_t> plain, sealed;
  };
  std::vector<Part> parts;
  for (uint64_t m : {0, 1, 2, 3, 7, 1000}) {
    for (uint32_t p = 0; p < 2; ++p) {
      Part x{m, p, std::vector<uint8_t>(n), std::vector<uint8_t>(secure::MessageCipher::sealedBytes(n))};
      for (size_t i = 0; i < n; ++i) x.plain[i] = static_cast<uint8_t>(i * 7 + m * 13 + p);
      tx.seal(m, p, x.plain.data(), n, x.sealed.data(), static_cast<int>(m % 3) + 1);
      parts.push_back(std::move(x));
    }
  }
  EXPECT_EQ(parts[0].sealed.size(), n + 4 * secure::kRecordOverhead);
  for (size_t k = parts.size(); k-- > 0;) {  // backwards: order is not needed
    const Part& x = parts[k];
    std::vector<uint8_t> out(n);
    EXPECT_TRUE(rx.openInto(x.msg, x.part, x.sealed.data(), n, out.data(), 2)) << x.msg << "/" << x.part;
    EXPECT_EQ(out, x.plain);
    std::vector<uint8_t> inPlace = x.sealed, seen(n);
    std::atomic<size_t> handed{0};
    EXPECT_TRUE(rx.openInPlace(x.msg, x.part, inPlace.data(), n, 3, [&](size_t off, const uint8_t* d, size_t len) {
      memcpy(seen.data() + off, d, len);
      handed += len;
    }));
    EXPECT_EQ(handed.load(), n);
    EXPECT_EQ(seen, x.plain);
  }
  std::vector<uint8_t> out(n);
  const Part& x = parts[4];                                                // message 2, part 0
  EXPECT_FALSE(rx.openInto(3, 0, x.sealed.data(), n, out.data(), 1));      // another message (another key, too)
  EXPECT_FALSE(rx.openInto(2, 1, x.sealed.data(), n, out.data(), 1));      // another part
  EXPECT_FALSE(rx.openInto(5, 0, x.sealed.data(), n, out.data(), 1));      // same place in another key
  EXPECT_FALSE(rx.openInto(2, 0, x.sealed.data(), n - 1, out.data(), 1));  // cut short
  for (size_t at : {size_t{0}, size_t{4}, x.sealed.size() / 2, x.sealed.size() - 1}) {  // length, body, tag
    std::vector<uint8_t> bad = x.sealed;
    bad[at] ^= 0x10;
    EXPECT_FALSE(rx.openInto(2, 0, bad.data(), n, out.data(), 2)) << "flipped byte " << at;
    size_t handed = 0;
    EXPECT_FALSE(rx.openInPlace(2, 0, bad.data(), n, 1, [&](size_t, const uint8_t*, size_t len) { handed += len; }));
    EXPECT_LT(handed, n);  // the bad record is never handed on
  }
  secure::MessageCipher other(keys.server, false, 3);  // the other direction's key
  EXPECT_FALSE(other.openInto(2, 0, x.sealed.data(), n, out.data(), 1));
  EXPECT_EQ(secure::MessageCipher::sealedBytes(1), 1 + secure::kRecordOverhead);
  EXPECT_EQ(secure::MessageCipher::sealedBytes(secure::kMaxRecordPlain),
            secure::kMaxRecordPlain + secure::kRecordOverhead);
}

TEST(LinkSecurity, CrossSiteLinksOverTcpOrUcxOnly) {
  test::EnvGuard mode("HETCCL_ENCRYPT", "cross-site");
  const char* sites[4] = {"onprem", "onprem", "cloud", "cloud"};
  const uint64_t hosts[4] = {1, 1, 2, 2};
  auto peers = fourRanks(sites, hosts);
  for (const char* inter : {"ucx", "tcp"}) {  // both seal their messages
    LinkSecurity s = planLinkSecurity(peers, 0, "shm", inter, false);
    EXPECT_EQ(s.encrypt, (std::vector<uint8_t>{0, 0, 1, 1})) << inter;
    EXPECT_EQ(s.encryptedPeers, 2);
  }
  EXPECT_HETCCL_ERROR(planLinkSecurity(peers, 0, "shm", "tcp", true), hetcclInvalidUsage, "HETCCL_JOB_SECRET_FILE");
  // Two sites on one host over shm: memory of one host, not encrypted.
  const uint64_t oneHost[4] = {1, 1, 1, 1};
  auto local = fourRanks(sites, oneHost);
  EXPECT_EQ(planLinkSecurity(local, 0, "shm", "tcp", true).encryptedPeers, 0);
  EXPECT_EQ(planLinkSecurity(local, 0, "tcp", "tcp", false).encryptedPeers, 2);
  EXPECT_EQ(planLinkSecurity(local, 0, "ucx", "ucx", false).encryptedPeers, 2);  // UCX may take tcp, even here
  // No sites named: nothing, so a weak secret is fine.
  const char* none[4] = {"", "", "", ""};
  EXPECT_EQ(planLinkSecurity(fourRanks(none, hosts), 3, "shm", "tcp", true).encryptedPeers, 0);
  test::EnvGuard all("HETCCL_ENCRYPT", "all");
  EXPECT_EQ(planLinkSecurity(fourRanks(none, hosts), 3, "shm", "ucx", false).encrypt,
            (std::vector<uint8_t>{1, 1, 0, 0}));
}

}  // namespace
}  // namespace hetccl
