// What the emulated runtime's parts share: the calling thread's device and
// last error.
#pragma once

#include <stdint.h>

#include "core/config.h"
#include "emu/emu_runtime.h"

namespace emu {

// A setting's value, or 0 where it is malformed (hetccl refuses a malformed
// HETCCL_EMU_* setting, naming it, when it loads this runtime).
int64_t setting(const hetccl::IntSetting& s);

int currentDevice();
// Records e as the thread's last error (unless success) and returns it.
emuError_t setError(emuError_t e);

}  // namespace emu
