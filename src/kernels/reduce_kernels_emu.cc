// The device reduction kernels built for the emulated GPU (device kind emu):
// the same source as the CUDA and HIP plugins, compiled as plain C++, each
// kernel one "thread" run on the emu stream (gpu_compat.h). Bit for bit the
// same arithmetic, since it is the same code.
#define HETCCL_EMU_BUILD 1
#include "reduce_kernels.cu"
