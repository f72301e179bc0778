// The steady clock, read cheaply: what call records, metrics and traces
// time themselves by (several reads per call, so its cost is part of every
// call's).
//
// Where the CPU has an invariant TSC (x86-64, constant_tsc and
// nonstop_tsc), the kernel's clocksource reads it too (tsc, kvm-clock), and
// reading it is cheaper than the vDSO's clock_gettime (several times
// cheaper in a VM whose clock is kvm-clock), clockUs() is the TSC scaled
// onto the steady clock: an anchor (TSC value, steady time, microseconds
// per tick), moved to a fresh steady-clock reading every 50 ms by whichever
// reader finds it due, so the scaled clock follows the steady clock's rate
// (NTP slewing included) and stays within a microsecond or two of it. A
// reading may then step back by that much: durations from it are clamped
// at 0 where they are shown. Elsewhere clockUs() is the steady clock
// itself.
#pragma once

namespace hetccl {

// Microseconds on std::chrono::steady_clock's scale (its epoch).
double clockUs();
// "tsc" or "steady": what clockUs() reads, for the INFO log.
const char* clockSource();

}  // namespace hetccl
