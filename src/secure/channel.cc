#include "secure/channel.h"

namespace hetccl::secure {

RecordChannel::RecordChannel(const LinkKeys& keys, bool client, uint64_t rekeyRecords, const std::string& what,
                             int threads, size_t inHand)
    : threads_(std::max(threads, 1)),
      sealer_(client ? keys.client : keys.server, rekeyRecords),
      opener_(client ? keys.server : keys.client, what, rekeyRecords, inHand) {}

void RecordChannel::seal(std::span<const PlainRecord> records) {
  size_t plain = 0;
  for (const PlainRecord& r : records) plain += r.bytes();
  out_.resize(plain + records.size() * kRecordOverhead);
  outOff_ = 0;
  sealer_.sealAll(records, out_.data(), threads_);
  sealedPlain_ = plain;
}

size_t RecordChannel::take(uint8_t* dst, size_t n) {
  if (size_t whole = opener_.openInto(dst, n, threads_)) return whole;  // no copy: the records fit
  std::span<const uint8_t> p = opener_.plain();
  size_t k = std::min(n, p.size());
  if (k) memcpy(dst, p.data(), k);
  opener_.consume(k);
  return k;
}

}  // namespace hetccl::secure
