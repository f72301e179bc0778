// Error texts of the torch backend, built without iostreams: numbers go
// through std::to_string, torch's types through their names, and every
// TORCH_CHECK passes one std::string. An extension whose compiler links
// libstdc++ statically holds a second copy of the iostream machinery, and
// formatting a number through it crashes inside torch 2.11 (docs/pytorch.md, Limits).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Layout.h>
#include <c10/core/ScalarType.h>

#include <string>
#include <type_traits>

namespace hetccl_torch {

inline void appendTo(std::string& s, const std::string& v) { s += v; }
inline void appendTo(std::string& s, const char* v) { s += v ? v : "(null)"; }
inline void appendTo(std::string& s, c10::ScalarType t) { s += c10::toString(t); }
inline void appendTo(std::string& s, const c10::Device& d) { s += d.str(); }
inline void appendTo(std::string& s, c10::Layout l) {
  s += l == c10::kStrided ? "strided" : "layout " + std::to_string(static_cast<int>(l));
}
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
void appendTo(std::string& s, T v) {
  s += std::to_string(v);
}

template <typename... A>
std::string msg(const A&... a) {
  std::string s;
  (appendTo(s, a), ...);
  return s;
}

}  // namespace hetccl_torch
