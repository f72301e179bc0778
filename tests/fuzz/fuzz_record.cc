// The encrypted-record decoder (secure::RecordOpener) on a stream a relay
// made: records sealed from the input's lengths and bytes, then altered by
// the input (a byte changed, a range cut out, a range repeated, the stream
// cut short), or raw bytes from the input; fed in the input's piece sizes,
// each record taken whole (openInto) or through plain().
//
// Input: mode byte (bit 0 raw, bits 1-2 rekey interval 1..4 records, bit 3
// take records through plain(), bits 4-5 the opener reads 1..4 records
// ahead and opens runs of them on as many threads), then for sealed mode: records (1..6; each a
// u16 length 1..1024 and a seed), an alteration (kind byte, u16 position,
// u16 length, u8 xor), piece sizes (u8 each, 0 means 1).
//
// Oracle: every byte handed on is the true plaintext at its position (a
// prefix of the records, never an altered byte); an unaltered stream gives
// all of it; an altered one gives at most the records before the alteration
// and then throws hetcclRemoteError, or ends inside a record. Raw bytes
// never authenticate (that would be a forgery of a random stream).
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "fuzz_util.h"
#include "secure/record.h"

using namespace hetccl;
using namespace fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const uint8_t mode = in.byte();
  const bool raw = mode & 1, viaPlain = mode & 8;
  const uint64_t rekey = 1 + ((mode >> 1) & 3);
  const size_t ahead = 1 + ((mode >> 4) & 3);
  std::vector<uint8_t> secret(32, 0x42), nonces(32, 0x17);
  static const secure::LinkKeys keys = secure::deriveLinkKeys(secret, nonces, "fuzz");

  std::vector<uint8_t> truth, wire;
  std::vector<size_t> recordEnds;  // wire offsets where records end
  bool altered = false;
  size_t alteredAt = 0;  // the first wire byte that differs from the sealed stream
  if (raw) {
    wire = in.bytes(4096);
    altered = true;
  } else {
    secure::RecordSealer sealer(keys.client, rekey);
    const int n = 1 + in.byte() % 6;
    for (int i = 0; i < n; ++i) {
      size_t len = 1 + in.take<uint16_t>() % 1024;
      uint8_t seed = in.byte();
      std::vector<uint8_t> plain(len);
      for (size_t j = 0; j < len; ++j) plain[j] = static_cast<uint8_t>(seed + j * 13);
      truth.insert(truth.end(), plain.begin(), plain.end());
      secure::Aes256Gcm::Piece p{plain.data(), len};
      std::vector<uint8_t> rec(len + secure::kRecordOverhead);
      sealer.seal({&p, 1}, rec.data());
      wire.insert(wire.end(), rec.begin(), rec.end());
      recordEnds.push_back(wire.size());
    }
    const std::vector<uint8_t> sealed = wire;
    const uint8_t kind = in.byte() % 5;
    size_t pos = in.take<uint16_t>() % wire.size();
    size_t len = 1 + in.take<uint16_t>() % 512;
    const uint8_t x = in.byte() | 1;
    switch (kind) {
      case 0: break;  // untouched
      case 1: wire[pos] ^= x, altered = true; break;
      case 2:
        len = std::min(len, wire.size() - pos);
        wire.erase(wire.begin() + pos, wire.begin() + pos + len), altered = true;
        break;
      case 3: {
        len = std::min(len, wire.size() - pos);
        std::vector<uint8_t> rep(wire.begin() + pos, wire.begin() + pos + len);
        wire.insert(wire.begin() + pos + len, rep.begin(), rep.end()), altered = true;
        pos += len;  // the first changed byte
        break;
      }
      case 4: wire.resize(pos), altered = true; break;
    }
    // Where the alteration takes effect: not always at pos, since the bytes
    // a cut or a repeat brings to pos may equal those it replaced (a cut
    // from a record's last byte whose successor starts with the same byte
    // leaves that record whole). Compared, not predicted.
    alteredAt =
        static_cast<size_t>(std::mismatch(wire.begin(), wire.end(), sealed.begin(), sealed.end()).first - wire.begin());
  }
  // Plaintext bytes of the records that end at or before the alteration.
  size_t safePlain = 0;
  for (size_t i = 0, plainEnd = 0, start = 0; i < recordEnds.size(); ++i) {
    plainEnd += recordEnds[i] - start - secure::kRecordOverhead;
    start = recordEnds[i];
    if (recordEnds[i] <= alteredAt) safePlain = plainEnd;
  }

  secure::RecordOpener opener(keys.client, "fuzz peer", rekey, ahead);
  std::vector<uint8_t> got, whole(secure::kMaxRecordPlain);
  bool threw = false;
  try {
    // Takes what the opener holds now (one run of records, or one record's
    // plaintext); false when it holds nothing complete.
    auto take = [&] {
      if (size_t k = viaPlain ? 0 : opener.openInto(whole.data(), whole.size(), static_cast<int>(ahead))) {
        got.insert(got.end(), whole.begin(), whole.begin() + k);
        return true;
      }
      auto p = opener.plain();
      got.insert(got.end(), p.begin(), p.end());
      opener.consume(p.size());
      return !p.empty();
    };
    size_t at = 0;
    while (at < wire.size()) {
      auto room = opener.space();
      size_t piece = std::max<size_t>(1, in.byte());
      size_t n = std::min({room.size(), piece, wire.size() - at});
      memcpy(room.data(), wire.data() + at, n);
      at += n;
      opener.filled(n);
      take();
    }
    while (take()) {  // records read ahead
    }
  } catch (const Error& e) {
    if (e.code() != hetcclRemoteError) abort();
    threw = true;
  }
  if (raw) {
    if (!got.empty()) abort();  // a forged record authenticated
    note(threw ? "raw refused" : "raw ended inside a record");
    return 0;
  }
  if (got.size() > truth.size() || !std::equal(got.begin(), got.end(), truth.begin())) abort();
  if (!altered) {
    if (threw || got.size() != truth.size()) abort();
    note("intact stream delivered");
  } else {
    if (got.size() > safePlain && !(alteredAt >= wire.size())) abort();  // bytes after the alteration were accepted
    note(threw ? "altered stream refused" : "altered stream ended inside a record");
  }
  return 0;
}
