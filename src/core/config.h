// The one typed registry of HETCCL_* settings. Every variable the library
// reads is declared once, in settings_table.cc's table, with its type, default,
// allowed values and meaning; hetccl-info prints the table with the values
// in force. Code reads a setting through its typed handle in settings.h
// (settings::kTimeoutS.get()), so a misspelt name fails the build, and a
// value outside what the table allows fails the read with
// hetcclInvalidArgument naming the variable, the value and what is allowed.
// Values are read from the environment at each get (tests change it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hetccl {

enum class VarType { kString, kInt, kBytes, kBool, kChoice };

struct VarSpec {
  const char* name;
  VarType type;
  const char* defaultValue;
  const char* fallback;  // another variable read when this one is unset (NCCL_*), or nullptr
  const char* help;
  int64_t min = 0;  // kInt, kBytes: allowed range, inclusive
  int64_t max = 0;
  const char* choices = nullptr;  // kChoice: "a|b|c" (matched case-insensitively; "" may be one)
};

class Config {
 public:
  const std::vector<VarSpec>& vars() const;
  const VarSpec& spec(const char* name) const;
  // The text in force: the environment's, else the fallback's, else the default.
  std::string raw(const char* name) const;
  // Whether the value came from the environment (this name or its fallback).
  bool isSet(const char* name) const;
  // What the table allows, for messages and hetccl-info ("1 to 31536000", "auto|0|1").
  std::string allowed(const VarSpec& v) const;
};

const Config& config();

// Variables hetccl once read and no longer does, with why, in words: a job
// that still sets one gets a warning at init (Comm), not a silent no-op.
struct RetiredVar {
  const char* name;
  const char* why;
};
const std::vector<RetiredVar>& retiredSettings();  // settings_table.cc
// One warning for each retired variable the environment sets: "NAME=value
// is set but no longer read: why".
std::vector<std::string> retiredSettingsInEnvironment();

// Parses "123", "4K", "2M", "1G" (powers of 1024); throws hetcclInvalidArgument
// naming `what` on garbage.
uint64_t parseBytes(const std::string& text, const char* what);
int64_t parseInt(const std::string& text, const char* what);

// Typed handles. Each names one entry of the table; get() validates.
class StringSetting {
 public:
  constexpr explicit StringSetting(const char* n) : name(n) {}
  std::string get() const;
  bool isSet() const { return config().isSet(name); }
  const char* name;
};

class IntSetting {
 public:
  constexpr explicit IntSetting(const char* n) : name(n) {}
  int64_t get() const;
  bool isSet() const { return config().isSet(name); }
  const char* name;
};

class BytesSetting {
 public:
  constexpr explicit BytesSetting(const char* n) : name(n) {}
  uint64_t get() const;
  bool isSet() const { return config().isSet(name); }
  const char* name;
};

// 1/0, true/false, yes/no, on/off (any case); anything else is refused.
class BoolSetting {
 public:
  constexpr explicit BoolSetting(const char* n) : name(n) {}
  bool get() const;
  bool isSet() const { return config().isSet(name); }
  const char* name;
};

// One of the table's choices, returned as the table spells it.
class ChoiceSetting {
 public:
  constexpr explicit ChoiceSetting(const char* n) : name(n) {}
  std::string get() const;
  bool isSet() const { return config().isSet(name); }
  const char* name;
};

}  // namespace hetccl
