#include "device/launch_stream.h"

namespace hetccl {

LaunchStream::LaunchStream(DeviceRuntime& d, DeviceRuntime::Priority p) : dev_(d) {
  flag_ = static_cast<uint64_t*>(d.allocPinned(sizeof(uint64_t)));
  *flag_ = 0;
  try {
    stream_ = d.createStream(p);
  } catch (...) {
    d.freePinned(flag_);
    throw;
  }
}

LaunchStream::~LaunchStream() {
  dev_.destroyStream(stream_);
  dev_.freePinned(flag_);
}

void LaunchStream::store(uint64_t ticket) { dev_.streamWriteValue(stream_, flag_, ticket); }

void LaunchStream::complete(uint64_t ticket) {
  uint64_t cur = __atomic_load_n(flag_, __ATOMIC_ACQUIRE);
  while (cur < ticket && !__atomic_compare_exchange_n(flag_, &cur, ticket, true, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE)) {
  }
}

}  // namespace hetccl
