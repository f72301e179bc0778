// The typed handle of every HETCCL_* setting (config.h says how they read;
// settings_table.cc holds each one's type, default, allowed values and
// meaning). tests/unit checks that the handles and the table name the same
// variables with the same types.
#pragma once

#include "core/config.h"

namespace hetccl::settings {

// Logging
inline constexpr ChoiceSetting kDebug{"HETCCL_DEBUG"};
inline constexpr StringSetting kDebugSubsys{"HETCCL_DEBUG_SUBSYS"};
// Bootstrap and rendezvous
inline constexpr IntSetting kTimeoutS{"HETCCL_TIMEOUT_S"};
inline constexpr StringSetting kCommId{"HETCCL_COMM_ID"};
inline constexpr StringSetting kJobSecret{"HETCCL_JOB_SECRET"};
inline constexpr StringSetting kJobSecretFile{"HETCCL_JOB_SECRET_FILE"};
inline constexpr ChoiceSetting kEncrypt{"HETCCL_ENCRYPT"};
inline constexpr StringSetting kSite{"HETCCL_SITE"};
inline constexpr StringSetting kSiteMap{"HETCCL_SITE_MAP"};
inline constexpr IntSetting kEncryptRekeyRecords{"HETCCL_ENCRYPT_REKEY_RECORDS"};
inline constexpr StringSetting kCryptoLib{"HETCCL_CRYPTO_LIB"};
inline constexpr StringSetting kSocketIfname{"HETCCL_SOCKET_IFNAME"};
// Topology
inline constexpr StringSetting kGroup{"HETCCL_GROUP"};
inline constexpr StringSetting kGroupMap{"HETCCL_GROUP_MAP"};
inline constexpr ChoiceSetting kDevice{"HETCCL_DEVICE"};
inline constexpr ChoiceSetting kBackend{"HETCCL_BACKEND"};
// Transports
inline constexpr StringSetting kTransport{"HETCCL_TRANSPORT"};
inline constexpr StringSetting kAutoInter{"HETCCL_AUTO_INTER"};
inline constexpr StringSetting kOfiProvider{"HETCCL_OFI_PROVIDER"};
inline constexpr BoolSetting kOfiRegister{"HETCCL_OFI_REGISTER"};
inline constexpr BytesSetting kOfiRmaMin{"HETCCL_OFI_RMA_MIN"};
inline constexpr BytesSetting kBuffSize{"HETCCL_BUFFSIZE"};
inline constexpr BytesSetting kShmSlotBytes{"HETCCL_SHM_SLOT_BYTES"};
inline constexpr BytesSetting kShmMax{"HETCCL_SHM_MAX"};
inline constexpr BoolSetting kShmCma{"HETCCL_SHM_CMA"};
inline constexpr IntSetting kHostThreads{"HETCCL_HOST_THREADS"};
inline constexpr IntSetting kSpinUs{"HETCCL_SPIN_US"};
inline constexpr BytesSetting kSocketBuffer{"HETCCL_SOCKET_BUFFER"};
inline constexpr BytesSetting kUcxRmaMin{"HETCCL_UCX_RMA_MIN"};
inline constexpr StringSetting kNetPlugin{"HETCCL_NET_PLUGIN"};
inline constexpr IntSetting kNetPluginAbi{"HETCCL_NET_PLUGIN_ABI"};
// Algorithms
inline constexpr BytesSetting kChunkBytes{"HETCCL_CHUNK_BYTES"};
inline constexpr BytesSetting kSmallBytes{"HETCCL_SMALL_BYTES"};
inline constexpr BoolSetting kCheckMismatch{"HETCCL_CHECK_MISMATCH"};
inline constexpr BoolSetting kPlanFolds{"HETCCL_PLAN_FOLDS"};
inline constexpr BoolSetting kHostLevels{"HETCCL_HOST_LEVELS"};
inline constexpr ChoiceSetting kBorderCut{"HETCCL_BORDER_CUT"};
inline constexpr StringSetting kLinkGbps{"HETCCL_LINK_GBPS"};
inline constexpr BytesSetting kBorderProbeBytes{"HETCCL_BORDER_PROBE_BYTES"};
// GPU ranks
inline constexpr ChoiceSetting kGpuBorder{"HETCCL_GPU_BORDER"};
inline constexpr BytesSetting kGpuBorderChunk{"HETCCL_GPU_BORDER_CHUNK"};
inline constexpr BytesSetting kGpuBorderMin{"HETCCL_GPU_BORDER_MIN"};
inline constexpr ChoiceSetting kGpuBorderKernel{"HETCCL_GPU_BORDER_KERNEL"};
inline constexpr ChoiceSetting kGpuStreamPriority{"HETCCL_GPU_STREAM_PRIORITY"};
inline constexpr IntSetting kCudaConnections{"HETCCL_CUDA_CONNECTIONS"};
inline constexpr BytesSetting kStagingMax{"HETCCL_STAGING_MAX"};
inline constexpr IntSetting kFlightRecorder{"HETCCL_FLIGHT_RECORDER"};
inline constexpr StringSetting kFlightDir{"HETCCL_FLIGHT_DIR"};
inline constexpr StringSetting kTraceFile{"HETCCL_TRACE_FILE"};
inline constexpr BoolSetting kMetrics{"HETCCL_METRICS"};
inline constexpr IntSetting kMetricsPort{"HETCCL_METRICS_PORT"};
inline constexpr StringSetting kMetricsAddr{"HETCCL_METRICS_ADDR"};
inline constexpr BytesSetting kDeviceScratchMax{"HETCCL_DEVICE_SCRATCH_MAX"};
// Libraries loaded at run time
inline constexpr StringSetting kCudaLib{"HETCCL_CUDA_LIB"};
inline constexpr StringSetting kHipLib{"HETCCL_HIP_LIB"};
inline constexpr StringSetting kNcclLib{"HETCCL_NCCL_LIB"};
inline constexpr StringSetting kRcclLib{"HETCCL_RCCL_LIB"};
inline constexpr StringSetting kUcxLib{"HETCCL_UCX_LIB"};
inline constexpr StringSetting kOfiLib{"HETCCL_OFI_LIB"};
inline constexpr StringSetting kCivetwebLib{"HETCCL_CIVETWEB_LIB"};
inline constexpr StringSetting kKernelsLib{"HETCCL_KERNELS_LIB"};
// The emulated GPU (device kind emu)
inline constexpr StringSetting kEmuLib{"HETCCL_EMU_LIB"};
inline constexpr StringSetting kEmuNcclLib{"HETCCL_EMU_NCCL_LIB"};
inline constexpr IntSetting kEmuDevices{"HETCCL_EMU_DEVICES"};
inline constexpr IntSetting kEmuLazyLoading{"HETCCL_EMU_LAZY_LOADING"};
inline constexpr IntSetting kEmuStallUs{"HETCCL_EMU_STALL_US"};
inline constexpr IntSetting kEmuCopyDelayUs{"HETCCL_EMU_COPY_DELAY_US"};
inline constexpr IntSetting kEmuFailAlloc{"HETCCL_EMU_FAIL_ALLOC"};
inline constexpr IntSetting kEmuInitDelayMs{"HETCCL_EMU_INIT_DELAY_MS"};

}  // namespace hetccl::settings
