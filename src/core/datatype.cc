#include "core/datatype.h"

#include <cstring>

namespace hetccl {
namespace {
struct TypeRow {
  const char* name;
  const char* alias;
  size_t size;
  bool isFloat;
};
constexpr TypeRow kTypes[hetcclNumTypes] = {
    {"int8", "char", 1, false},       {"uint8", "uint8_t", 1, false},  {"int32", "int", 4, false},
    {"uint32", "uint32_t", 4, false}, {"int64", "int64_t", 8, false},  {"uint64", "uint64_t", 8, false},
    {"half", "float16", 2, true},     {"float", "float32", 4, true},   {"double", "float64", 8, true},
    {"bfloat16", "bf16", 2, true},    {"fp8_e4m3", "f8e4m3", 1, true}, {"fp8_e5m2", "f8e5m2", 1, true},
};
}  // namespace

bool dataTypeValid(int dt) { return dt >= 0 && dt < hetcclNumTypes; }
size_t dataTypeSize(DataType dt) { return dataTypeValid(dt) ? kTypes[dt].size : 0; }
const char* dataTypeName(DataType dt) { return dataTypeValid(dt) ? kTypes[dt].name : "invalid"; }
bool dataTypeIsFloat(DataType dt) { return dataTypeValid(dt) && kTypes[dt].isFloat; }

bool parseDataType(const std::string& name, DataType* dt) {
  for (int i = 0; i < hetcclNumTypes; ++i) {
    if (strcasecmp(name.c_str(), kTypes[i].name) == 0 || strcasecmp(name.c_str(), kTypes[i].alias) == 0) {
      *dt = static_cast<DataType>(i);
      return true;
    }
  }
  return false;
}

const char* redKindName(RedKind k) {
  static const char* names[] = {"sum", "prod", "max", "min"};
  return names[static_cast<int>(k)];
}

const char* redOpName(hetcclRedOp_t op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  if (op >= 0 && op < hetcclNumOps) return names[op];
  return "premulsum";
}

bool parseRedOp(const std::string& name, hetcclRedOp_t* op) {
  for (int i = 0; i < hetcclNumOps; ++i) {
    if (strcasecmp(name.c_str(), redOpName(static_cast<hetcclRedOp_t>(i))) == 0) {
      *op = static_cast<hetcclRedOp_t>(i);
      return true;
    }
  }
  return false;
}

}  // namespace hetccl
