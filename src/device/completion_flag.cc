#include "device/completion_flag.h"

namespace hetccl {

CompletionFlag::CompletionFlag(DeviceRuntime& d) : dev_(d) {
  flag_ = static_cast<uint64_t*>(d.allocPinned(sizeof(uint64_t)));
  *flag_ = 0;
}

CompletionFlag::~CompletionFlag() { dev_.freePinned(flag_); }

void CompletionFlag::complete(uint64_t ticket) {
  uint64_t cur = __atomic_load_n(flag_, __ATOMIC_ACQUIRE);
  while (cur < ticket && !__atomic_compare_exchange_n(flag_, &cur, ticket, true, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE)) {
  }
}

}  // namespace hetccl
