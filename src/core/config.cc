#include "core/config.h"

#include <strings.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace hetccl {

const std::vector<VarSpec>& settingsTable();  // settings_table.cc

namespace {

const char* rawEnv(const VarSpec& v) {
  const char* val = getenv(v.name);
  if ((!val || !*val) && v.fallback) val = getenv(v.fallback);
  return (val && *val) ? val : nullptr;
}

[[noreturn]] void refuse(const VarSpec& v, const std::string& value, const std::string& allowed) {
  throwError(hetcclInvalidArgument,
             std::string(v.name) + " is '" + value + "': expected " + allowed + " (" + v.help + ")");
}

const VarSpec& typed(const char* name, VarType type) {
  const VarSpec& v = config().spec(name);
  if (v.type != type) throwError(hetcclInternalError, std::string("setting ") + name + " read as the wrong type");
  return v;
}

}  // namespace

const Config& config() {
  static Config c;
  return c;
}

const std::vector<VarSpec>& Config::vars() const { return settingsTable(); }

std::vector<std::string> retiredSettingsInEnvironment() {
  std::vector<std::string> out;
  for (const RetiredVar& v : retiredSettings())
    if (const char* val = getenv(v.name); val && *val)
      out.push_back(std::string(v.name) + "=" + val + " is set but no longer read: " + v.why);
  return out;
}

const VarSpec& Config::spec(const char* name) const {
  for (const auto& v : settingsTable())
    if (strcmp(v.name, name) == 0) return v;
  throwError(hetcclInternalError, std::string("setting not in the registry: ") + name);
}

std::string Config::raw(const char* name) const {
  const VarSpec& v = spec(name);
  const char* val = rawEnv(v);
  return val ? val : v.defaultValue;
}

bool Config::isSet(const char* name) const { return rawEnv(spec(name)) != nullptr; }

std::string Config::allowed(const VarSpec& v) const {
  switch (v.type) {
    case VarType::kInt: return "an integer from " + std::to_string(v.min) + " to " + std::to_string(v.max);
    case VarType::kBytes:
      return "a size from " + std::to_string(v.min) + " to " + std::to_string(v.max) + " bytes (K, M, G suffixes)";
    case VarType::kBool: return "1 or 0 (true/false, yes/no, on/off)";
    case VarType::kChoice: {
      std::string c = v.choices, out;
      size_t pos = 0;
      while (pos <= c.size()) {
        size_t bar = c.find('|', pos);
        if (bar == std::string::npos) bar = c.size();
        std::string item = c.substr(pos, bar - pos);
        out += (out.empty() ? "" : ", ") + (item.empty() ? std::string("unset") : item);
        pos = bar + 1;
      }
      return "one of " + out;
    }
    case VarType::kString: return "any text";
  }
  return "";
}

std::string StringSetting::get() const { return config().raw(typed(name, VarType::kString).name); }

int64_t IntSetting::get() const {
  const VarSpec& v = typed(name, VarType::kInt);
  std::string text = config().raw(name);
  int64_t x = 0;
  try {
    x = parseInt(text, name);
  } catch (const Error&) {
    refuse(v, text, config().allowed(v));
  }
  if (x < v.min || x > v.max) refuse(v, text, config().allowed(v));
  return x;
}

uint64_t BytesSetting::get() const {
  const VarSpec& v = typed(name, VarType::kBytes);
  std::string text = config().raw(name);
  uint64_t x = 0;
  try {
    x = parseBytes(text, name);
  } catch (const Error&) {
    refuse(v, text, config().allowed(v));
  }
  if (x < static_cast<uint64_t>(v.min) || x > static_cast<uint64_t>(v.max)) refuse(v, text, config().allowed(v));
  return x;
}

bool BoolSetting::get() const {
  const VarSpec& v = typed(name, VarType::kBool);
  std::string s = config().raw(name);
  for (const char* yes : {"1", "true", "yes", "on"})
    if (strcasecmp(s.c_str(), yes) == 0) return true;
  for (const char* no : {"0", "false", "no", "off"})
    if (strcasecmp(s.c_str(), no) == 0) return false;
  refuse(v, s, config().allowed(v));
}

std::string ChoiceSetting::get() const {
  const VarSpec& v = typed(name, VarType::kChoice);
  std::string s = config().raw(name);
  std::string c = v.choices;
  size_t pos = 0;
  while (pos <= c.size()) {
    size_t bar = c.find('|', pos);
    if (bar == std::string::npos) bar = c.size();
    std::string item = c.substr(pos, bar - pos);
    if (strcasecmp(item.c_str(), s.c_str()) == 0) return item;
    pos = bar + 1;
  }
  refuse(v, s, config().allowed(v));
}

int64_t parseInt(const std::string& text, const char* what) {
  if (text.empty() || !(text[0] == '-' || (text[0] >= '0' && text[0] <= '9')))
    throwError(hetcclInvalidArgument, std::string(what) + ": not an integer: '" + text + "'");
  errno = 0;
  char* end = nullptr;
  long long v = strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0')
    throwError(hetcclInvalidArgument, std::string(what) + ": not an integer: '" + text + "'");
  return v;
}

uint64_t parseBytes(const std::string& text, const char* what) {
  if (text.empty() || text[0] < '0' || text[0] > '9')
    throwError(hetcclInvalidArgument, std::string(what) + ": not a size: '" + text + "'");
  errno = 0;
  char* end = nullptr;
  unsigned long long v = strtoull(text.c_str(), &end, 10);
  if (errno != 0) throwError(hetcclInvalidArgument, std::string(what) + ": not a size: '" + text + "'");
  uint64_t mult = 1;
  if (*end == 'K' || *end == 'k')
    mult = 1ull << 10, ++end;
  else if (*end == 'M' || *end == 'm')
    mult = 1ull << 20, ++end;
  else if (*end == 'G' || *end == 'g')
    mult = 1ull << 30, ++end;
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0' || (v != 0 && mult > UINT64_MAX / v))
    throwError(hetcclInvalidArgument, std::string(what) + ": not a size: '" + text + "'");
  return v * mult;
}

}  // namespace hetccl
