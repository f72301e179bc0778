// The drop-in's Parameter API (NCCL 2.30's ncclParam*): keys naming
// hetccl's own settings (HETCCL_*, the typed registry of core/config.h)
// are answered here, read from the environment as hetccl reads them; every
// other key goes to the vendor library when it has the Parameter API, and
// is otherwise refused with a message naming that library's version.
//
// What hetccl answers:
// - the typed getters read integer, byte-size and boolean settings (a
//   boolean as 0 or 1) and fail with ncclInvalidArgument, naming the value
//   and the type, where it does not fit; string and choice settings are
//   read with ncclParamGetStr, ncclParamGet or ncclParamGetParameter;
// - text is the value in force as hetccl reads it (sizes in bytes: 4M is
//   4194304; booleans 1 or 0); ncclParamGet copies an integer setting as an
//   int64_t, a size as a uint64_t, a boolean as one byte and text with its
//   terminating NUL, and fails where maxLen is too small, naming the size
//   it needs;
// - returned text and key tables belong to the calling thread until its
//   next call of the same function (NCCL's rule); handles live as long as
//   the process.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/log.h"
#include "dropin/dropin.h"

using namespace hetccl;
using namespace hetccl::dropin;

namespace {

ncclResult_t code(hetcclResult_t r) { return static_cast<ncclResult_t>(r); }

// What ncclParamBind hands out: a hetccl setting, or the vendor library's
// own handle.
struct ParamHandle {
  std::string key;
  const VarSpec* spec = nullptr;  // a hetccl setting, else null
  void* vendor = nullptr;         // the vendor library's handle
};
using ncclParamHandle_t = ParamHandle*;

// Never destroyed: handles stay valid until the process ends.
std::mutex& handlesMu() {
  static auto* m = new std::mutex;
  return *m;
}
std::map<std::string, ParamHandle*>& handles() {
  static auto* h = new std::map<std::string, ParamHandle*>;
  return *h;
}
std::set<const ParamHandle*>& issued() {
  static auto* s = new std::set<const ParamHandle*>;
  return *s;
}

bool isHetcclKey(const char* key) { return strncmp(key, "HETCCL_", 7) == 0; }

// The registry entry of a HETCCL_* key; an unknown one is an error.
const VarSpec& hetcclSpec(const char* key) {
  for (const VarSpec& v : config().vars())
    if (strcmp(v.name, key) == 0) return v;
  throwError(hetcclInvalidArgument, std::string("no hetccl setting is named ") + key + " (hetccl-info lists them all)");
}

// The vendor library for a key that is not hetccl's, where it has the
// Parameter API; otherwise the error NCCL's callers expect of a library
// without it.
const nccl::NcclApi& vendorParams(const char* key) {
  const nccl::NcclApi* v = vendorLibrary();
  if (!v)
    throwError(hetcclInvalidUsage, std::string("key ") + key +
                                       " is not a hetccl setting and no vendor NCCL library is loaded to ask "
                                       "(HETCCL_NCCL_LIB names it)");
  if (!v->paramBind)
    throwError(hetcclInvalidUsage, std::string("key ") + key + " is not a hetccl setting, and the loaded " +
                                       nccl::ncclLibName(v->flavor) + " (" + v->path + ", version " +
                                       nccl::ncclVersionString(v->version) +
                                       ") has no Parameter API (NCCL 2.30 added it)");
  return *v;
}

// The vendor library's function of a call, where it lacks that one only.
template <class Fn>
Fn vendorFn(const nccl::NcclApi& v, Fn nccl::NcclApi::*fn, const char* name) {
  if (!(v.*fn))
    throwError(hetcclInvalidUsage, std::string(name) + " is not in the loaded " + nccl::ncclLibName(v.flavor) + " (" +
                                       v.path + ", version " + nccl::ncclVersionString(v.version) + ")");
  return v.*fn;
}

void vendorCall(const nccl::NcclApi& v, nccl::ncclResult_t r, const char* fn) {
  vendorCheck(Vendor{&v, nullptr}, r, fn);
}

const ParamHandle& checkHandle(ncclParamHandle_t h) {
  HETCCL_CHECK_ARG(h, "handle is NULL");
  std::lock_guard<std::mutex> g(handlesMu());
  if (!issued().count(h)) throwError(hetcclInvalidArgument, "handle was not returned by ncclParamBind");
  return *h;
}

// A numeric setting's value: signed (kInt, kBool) or unsigned (kBytes).
struct Number {
  bool isSigned = true;
  int64_t s = 0;
  uint64_t u = 0;
};

Number numberOf(const VarSpec& spec) {
  Number n;
  switch (spec.type) {
    case VarType::kInt: n.s = IntSetting{spec.name}.get(); return n;
    case VarType::kBool: n.s = BoolSetting{spec.name}.get() ? 1 : 0; return n;
    case VarType::kBytes:
      n.isSigned = false;
      n.u = BytesSetting{spec.name}.get();
      return n;
    default:
      throwError(hetcclInvalidArgument, std::string(spec.name) + " is a text setting (value '" +
                                            config().raw(spec.name) +
                                            "'): read it with ncclParamGetStr, ncclParamGet or ncclParamGetParameter");
  }
}

std::string textOf(const VarSpec& spec) {
  switch (spec.type) {
    case VarType::kString: return StringSetting{spec.name}.get();
    case VarType::kChoice: return ChoiceSetting{spec.name}.get();
    default: {
      Number n = numberOf(spec);
      return n.isSigned ? std::to_string(n.s) : std::to_string(n.u);
    }
  }
}

template <class T, class Fn>
void getTyped(ncclParamHandle_t h, T* out, Fn nccl::NcclApi::*fn, const char* name, const char* typeName) {
  const ParamHandle& p = checkHandle(h);
  HETCCL_CHECK_ARG(out, "out is NULL");
  if (!p.spec) {
    const nccl::NcclApi& v = vendorParams(p.key.c_str());
    return vendorCall(v, vendorFn(v, fn, name)(p.vendor, out), name);
  }
  Number n = numberOf(*p.spec);
  const bool fits = n.isSigned ? std::in_range<T>(n.s) : std::in_range<T>(n.u);
  const std::string value = n.isSigned ? std::to_string(n.s) : std::to_string(n.u);
  if (!fits)
    throwError(hetcclInvalidArgument, p.key + "=" + value + " does not fit " + typeName + " (" +
                                          std::to_string(+std::numeric_limits<T>::min()) + " to " +
                                          std::to_string(+std::numeric_limits<T>::max()) + ")");
  *out = n.isSigned ? static_cast<T>(n.s) : static_cast<T>(n.u);
}

// ncclParamGet's bytes of a hetccl setting.
std::vector<uint8_t> rawOf(const VarSpec& spec) {
  std::vector<uint8_t> bytes;
  auto put = [&](const void* p, size_t n) {
    bytes.assign(static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
  };
  if (spec.type == VarType::kString || spec.type == VarType::kChoice) {
    const std::string t = textOf(spec);
    put(t.c_str(), t.size() + 1);
    return bytes;
  }
  Number n = numberOf(spec);
  if (spec.type == VarType::kBool) {
    const uint8_t b = n.s ? 1 : 0;
    put(&b, 1);
  } else if (n.isSigned) {
    put(&n.s, sizeof n.s);
  } else {
    put(&n.u, sizeof n.u);
  }
  return bytes;
}

}  // namespace

extern "C" {

ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key) {
  return code(guard(nullptr, "ncclParamBind", [&] {
    HETCCL_CHECK_ARG(out, "out is NULL");
    HETCCL_CHECK_ARG(key, "key is NULL");
    *out = nullptr;
    {
      std::lock_guard<std::mutex> g(handlesMu());
      if (auto it = handles().find(key); it != handles().end()) {
        *out = it->second;
        return;
      }
    }
    auto h = std::make_unique<ParamHandle>();
    h->key = key;
    if (isHetcclKey(key)) {
      h->spec = &hetcclSpec(key);
    } else {
      const nccl::NcclApi& v = vendorParams(key);
      vendorCall(v, v.paramBind(&h->vendor, key), "ncclParamBind");
      LOG_INFO(kInit, "ncclParamBind(%s): the vendor library's parameter", key);
    }
    std::lock_guard<std::mutex> g(handlesMu());
    auto [it, added] = handles().emplace(key, h.get());
    if (added) issued().insert(h.release());
    *out = it->second;
  }));
}

ncclResult_t ncclParamGetI8(ncclParamHandle_t h, int8_t* out) {
  return code(guard(nullptr, "ncclParamGetI8",
                    [&] { getTyped<int8_t>(h, out, &nccl::NcclApi::paramGetI8, "ncclParamGetI8", "int8_t"); }));
}
ncclResult_t ncclParamGetI16(ncclParamHandle_t h, int16_t* out) {
  return code(guard(nullptr, "ncclParamGetI16",
                    [&] { getTyped<int16_t>(h, out, &nccl::NcclApi::paramGetI16, "ncclParamGetI16", "int16_t"); }));
}
ncclResult_t ncclParamGetI32(ncclParamHandle_t h, int32_t* out) {
  return code(guard(nullptr, "ncclParamGetI32",
                    [&] { getTyped<int32_t>(h, out, &nccl::NcclApi::paramGetI32, "ncclParamGetI32", "int32_t"); }));
}
ncclResult_t ncclParamGetI64(ncclParamHandle_t h, int64_t* out) {
  return code(guard(nullptr, "ncclParamGetI64",
                    [&] { getTyped<int64_t>(h, out, &nccl::NcclApi::paramGetI64, "ncclParamGetI64", "int64_t"); }));
}
ncclResult_t ncclParamGetU8(ncclParamHandle_t h, uint8_t* out) {
  return code(guard(nullptr, "ncclParamGetU8",
                    [&] { getTyped<uint8_t>(h, out, &nccl::NcclApi::paramGetU8, "ncclParamGetU8", "uint8_t"); }));
}
ncclResult_t ncclParamGetU16(ncclParamHandle_t h, uint16_t* out) {
  return code(guard(nullptr, "ncclParamGetU16",
                    [&] { getTyped<uint16_t>(h, out, &nccl::NcclApi::paramGetU16, "ncclParamGetU16", "uint16_t"); }));
}
ncclResult_t ncclParamGetU32(ncclParamHandle_t h, uint32_t* out) {
  return code(guard(nullptr, "ncclParamGetU32",
                    [&] { getTyped<uint32_t>(h, out, &nccl::NcclApi::paramGetU32, "ncclParamGetU32", "uint32_t"); }));
}
ncclResult_t ncclParamGetU64(ncclParamHandle_t h, uint64_t* out) {
  return code(guard(nullptr, "ncclParamGetU64",
                    [&] { getTyped<uint64_t>(h, out, &nccl::NcclApi::paramGetU64, "ncclParamGetU64", "uint64_t"); }));
}

ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char** out) {
  return code(guard(nullptr, "ncclParamGetStr", [&] {
    const ParamHandle& p = checkHandle(h);
    HETCCL_CHECK_ARG(out, "out is NULL");
    if (!p.spec) {
      const nccl::NcclApi& v = vendorParams(p.key.c_str());
      return vendorCall(v, vendorFn(v, &nccl::NcclApi::paramGetStr, "ncclParamGetStr")(p.vendor, out),
                        "ncclParamGetStr");
    }
    static thread_local std::string text;
    text = textOf(*p.spec);
    *out = text.c_str();
  }));
}

ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len) {
  return code(guard(nullptr, "ncclParamGet", [&] {
    const ParamHandle& p = checkHandle(h);
    HETCCL_CHECK_ARG(out, "out is NULL");
    HETCCL_CHECK_ARG(len, "len is NULL");
    if (!p.spec) {
      const nccl::NcclApi& v = vendorParams(p.key.c_str());
      return vendorCall(v, vendorFn(v, &nccl::NcclApi::paramGet, "ncclParamGet")(p.vendor, out, maxLen, len),
                        "ncclParamGet");
    }
    *len = 0;
    const std::vector<uint8_t> bytes = rawOf(*p.spec);
    if (maxLen < 0 || static_cast<size_t>(maxLen) < bytes.size())
      throwError(hetcclInvalidArgument,
                 p.key + " needs " + std::to_string(bytes.size()) + " bytes; maxLen is " + std::to_string(maxLen));
    memcpy(out, bytes.data(), bytes.size());
    *len = static_cast<int>(bytes.size());
  }));
}

ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen) {
  return code(guard(nullptr, "ncclParamGetParameter", [&] {
    HETCCL_CHECK_ARG(key, "key is NULL");
    HETCCL_CHECK_ARG(value, "value is NULL");
    HETCCL_CHECK_ARG(valueLen, "valueLen is NULL");
    *value = nullptr;
    *valueLen = 0;
    if (!isHetcclKey(key)) {
      const nccl::NcclApi& v = vendorParams(key);
      auto get = vendorFn(v, &nccl::NcclApi::paramGetParameter, "ncclParamGetParameter");
      return vendorCall(v, get(key, value, valueLen), "ncclParamGetParameter");
    }
    static thread_local std::string text;
    text = textOf(hetcclSpec(key));
    *value = text.c_str();
    *valueLen = static_cast<int>(text.size());
  }));
}

// hetccl's keys, then the vendor library's where it has the Parameter API.
ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  return code(guard(nullptr, "ncclParamGetAllParameterKeys", [&] {
    HETCCL_CHECK_ARG(table, "table is NULL");
    HETCCL_CHECK_ARG(tableLen, "tableLen is NULL");
    static thread_local std::vector<std::string> keys;
    static thread_local std::vector<const char*> pointers;
    keys.clear();
    for (const VarSpec& v : config().vars()) keys.emplace_back(v.name);
    if (const nccl::NcclApi* v = vendorLibrary(); v && v->paramGetAllParameterKeys) {
      const char** theirs = nullptr;
      int n = 0;
      vendorCall(*v, v->paramGetAllParameterKeys(&theirs, &n), "ncclParamGetAllParameterKeys");
      for (int i = 0; i < n && theirs; ++i)
        if (theirs[i]) keys.emplace_back(theirs[i]);
    }
    pointers.clear();
    for (const std::string& k : keys) pointers.push_back(k.c_str());
    *table = pointers.data();
    *tableLen = static_cast<int>(pointers.size());
  }));
}

// hetccl's settings on stdout (as NCCL prints its own), then the vendor
// library's dump where it has one. A value the registry refuses is printed
// with the reason instead.
void ncclParamDumpAll() {
  guard(nullptr, "ncclParamDumpAll", [&] {
    printf("=== hetccl settings ===\n");
    for (const VarSpec& v : config().vars()) {
      std::string text;
      try {
        text = textOf(v);
      } catch (const Error& e) {
        text = std::string("(invalid: ") + e.what() + ")";
      }
      printf("%s=%s%s\n", v.name, text.c_str(), config().isSet(v.name) ? "" : " (default)");
    }
    const nccl::NcclApi* vendor = vendorLibrary();
    if (vendor && vendor->paramDumpAll) {
      fflush(stdout);
      vendor->paramDumpAll();
    } else if (vendor) {
      printf("(the loaded %s, version %s, has no Parameter API)\n", nccl::ncclLibName(vendor->flavor).c_str(),
             nccl::ncclVersionString(vendor->version).c_str());
    }
    fflush(stdout);
  });
}

}  // extern "C"
