// extern "C" queries of the library itself: its settings and what this
// build can load (what hetccl-info prints).
#include <cstring>
#include <string>

#include "api/guard.h"
#include "backend/backend.h"
#include "core/config.h"
#include "device/device.h"
#include "transport/transport.h"

using namespace hetccl;

namespace {

const char* typeName(VarType t) {
  switch (t) {
    case VarType::kString: return "string";
    case VarType::kInt: return "int";
    case VarType::kBytes: return "bytes";
    case VarType::kBool: return "bool";
    case VarType::kChoice: return "choice";
  }
  return "?";
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

extern "C" {

hetcclResult_t hetcclGetSettingCount(int* count) {
  return guard(nullptr, "hetcclGetSettingCount", [&] {
    HETCCL_CHECK_ARG(count, "count is NULL");
    *count = static_cast<int>(config().vars().size());
  });
}

hetcclResult_t hetcclGetSetting(int index, hetcclSetting_t* setting) {
  return guard(nullptr, "hetcclGetSetting", [&] {
    HETCCL_CHECK_ARG(setting, "setting is NULL");
    HETCCL_CHECK_ARG(setting->size >= offsetof(hetcclSetting_t, fromEnvironment) + sizeof(int),
                     "setting->size " + std::to_string(setting->size) + " is smaller than any version");
    const auto& vars = config().vars();
    HETCCL_CHECK_ARG(index >= 0 && index < static_cast<int>(vars.size()),
                     "index " + std::to_string(index) + " out of range [0, " + std::to_string(vars.size()) + ")");
    const VarSpec& v = vars[index];
    thread_local std::string value, allowed;
    value = config().raw(v.name);
    allowed = config().allowed(v);
    hetcclSetting_t out{};
    out.size = sizeof(out);
    out.name = v.name;
    out.type = typeName(v.type);
    out.value = value.c_str();
    out.defaultValue = v.defaultValue;
    out.alsoRead = v.fallback;
    out.allowed = allowed.c_str();
    out.help = v.help;
    out.fromEnvironment = config().isSet(v.name) ? 1 : 0;
    size_t n = setting->size < sizeof(out) ? setting->size : sizeof(out);
    memcpy(setting, &out, n);
    setting->size = n;
  });
}

hetcclResult_t hetcclGetBuildInfo(hetcclBuildInfo_t* info) {
  return guard(nullptr, "hetcclGetBuildInfo", [&] {
    HETCCL_CHECK_ARG(info, "info is NULL");
    HETCCL_CHECK_ARG(info->size >= sizeof(hetcclBuildInfo_t),
                     "info->size " + std::to_string(info->size) + " is smaller than any version");
    hetcclBuildInfo_t out{};
    out.size = sizeof(out);
    snprintf(out.deviceKinds, sizeof(out.deviceKinds), "%s", joined(deviceKinds()).c_str());
    snprintf(out.transports, sizeof(out.transports), "%s", joined(transportNames()).c_str());
    snprintf(out.backends, sizeof(out.backends), "%s", joined(backendNames()).c_str());
    memcpy(info, &out, sizeof(out));
  });
}

}  // extern "C"
