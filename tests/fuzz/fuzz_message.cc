// The encrypted-message part decoder (secure::MessageCipher, the ucx
// transport's sealed parts) on what a relay could deliver: a part sealed
// from the input's length, bytes and place (message, part), then opened
// intact, with a byte flipped, at another message, part or length, with the
// other direction's key, or raw bytes from the input in its place; opened
// into a buffer or in place record by record, on 1..4 threads.
//
// Input: mode byte (bits 0-1 messages per key - 1, bit 2 raw, bit 3 in
// place, bits 4-5 threads - 1), message (u16), part (u8), length (u16, times
// 16, plus 1: up to about 1 MiB, four records), seed, alteration (kind byte,
// u32 position, xor byte).
//
// Oracle: an intact part opens to exactly its plaintext, and so does a
// shorter length that ends on a record boundary (its whole records; the
// length itself comes from the authenticated header); every other case is
// refused, and in place hands on only records that are true plaintext at
// their offsets, never all of them.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "fuzz_util.h"
#include "secure/message_cipher.h"

using namespace hetccl;
using namespace fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const uint8_t mode = in.byte();
  const uint64_t perKey = 1 + (mode & 3);
  const bool raw = mode & 4, inPlace = mode & 8;
  const int threads = 1 + ((mode >> 4) & 3);
  const uint64_t msg = in.take<uint16_t>();
  const uint32_t part = in.byte();
  const size_t n = 1 + (static_cast<size_t>(in.take<uint16_t>()) * 16) % (size_t{1} << 20);
  const uint8_t seed = in.byte();
  const uint8_t kind = raw ? 0 : in.byte() % 6;
  const uint32_t pos = in.take<uint32_t>();
  const uint8_t x = in.byte() | 1;
  std::vector<uint8_t> secret(32, 0x42), nonces(32, 0x17);
  static const secure::LinkKeys keys = secure::deriveLinkKeys(secret, nonces, "fuzz");

  std::vector<uint8_t> truth(n);
  for (size_t j = 0; j < n; ++j) truth[j] = static_cast<uint8_t>(seed + j * 13);
  // Room for the sealed form of the longest length opened (n + 1).
  std::vector<uint8_t> wire(secure::MessageCipher::sealedBytes(n + 1), 0);
  if (raw) {
    const std::vector<uint8_t> b = in.bytes(wire.size());
    std::copy(b.begin(), b.end(), wire.begin());
  } else {
    secure::MessageCipher tx(keys.client, true, perKey);
    tx.seal(msg, part, truth.data(), n, wire.data(), threads);
  }
  uint64_t openMsg = msg;
  uint32_t openPart = part;
  size_t openLen = n;
  const secure::DirectionKey* key = &keys.client;
  switch (kind) {
    case 0: break;  // intact (or raw)
    case 1: wire[pos % secure::MessageCipher::sealedBytes(n)] ^= x; break;
    case 2: openMsg = msg + x; break;
    case 3: openPart = part ^ x; break;
    case 4: openLen = (x & 2) || n == 1 ? n + 1 : n - 1; break;
    case 5: key = &keys.server; break;
  }
  const bool intact = !raw && (kind == 0 || (kind == 4 && openLen < n && openLen % secure::kMaxRecordPlain == 0));
  secure::MessageCipher rx(*key, false, perKey);
  std::vector<uint8_t> out(openLen, 0);
  bool good;
  std::atomic<size_t> handed{0};
  if (inPlace) {
    good =
        rx.openInPlace(openMsg, openPart, wire.data(), openLen, threads, [&](size_t off, const uint8_t* d, size_t len) {
          FUZZ_CHECK(off + len <= n && std::equal(d, d + len, truth.begin() + off));  // only true plaintext
          handed += len;
        });
  } else {
    good = rx.openInto(openMsg, openPart, wire.data(), openLen, out.data(), threads);
  }
  if (intact) {
    FUZZ_CHECK(good);
    if (!inPlace) FUZZ_CHECK(std::equal(out.begin(), out.end(), truth.begin()));
    note("intact part opened");
  } else {
    FUZZ_CHECK(!good);
    if (inPlace) FUZZ_CHECK(handed.load() < openLen);
    note(raw ? "raw refused" : "altered part refused");
  }
  return 0;
}
