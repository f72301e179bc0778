// The one typed registry of HETCCL_* settings. Every variable the library
// reads is declared in config.cc's table with its type, default and meaning;
// hetccl-info prints the table with the values in force. Reading a name that
// is not in the table is a programming error (throws hetcclInternalError).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hetccl {

enum class VarType { kString, kInt, kBytes, kBool };

struct VarSpec {
  const char* name;
  VarType type;
  const char* defaultValue;
  const char* fallback;  // another variable read when this one is unset (NCCL_*), or nullptr
  const char* help;
};

class Config {
 public:
  const std::vector<VarSpec>& vars() const;
  // Raw value: the environment's, else the fallback's, else the default.
  std::string getString(const char* name) const;
  int64_t getInt(const char* name) const;
  // Sizes accept K, M, G suffixes (powers of 1024).
  uint64_t getBytes(const char* name) const;
  bool getBool(const char* name) const;
  // Whether the value came from the environment (this name or its fallback).
  bool isSet(const char* name) const;

 private:
  const VarSpec& spec(const char* name) const;
};

const Config& config();

// Parses "123", "4K", "2M", "1G" (powers of 1024); throws hetcclInvalidArgument
// naming `what` on garbage.
uint64_t parseBytes(const std::string& text, const char* what);
int64_t parseInt(const std::string& text, const char* what);

}  // namespace hetccl
