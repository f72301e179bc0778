#include "reference.h"

#include <gtest/gtest.h>

#include <cstring>

namespace hmp {

void expectReduced(const Check& c, const void* got, const Expected& want, const std::string& what) {
  size_t first = 0;
  const size_t bad = ref::countWrongReduced(c, got, want, &first);
  if (bad == 0) return;
  const size_t es = ref::typeInfo(c.dt).size;
  ADD_FAILURE() << c.label() << ": " << what << ": " << bad << " of " << want.value.size()
                << " elements wrong; first at " << first << ": got "
                << ref::describeElem(c.dt, static_cast<const uint8_t*>(got) + first * es) << ", want "
                << want.value[first]
                << (want.bound[first] > 0 ? " +- " + std::to_string(want.bound[first]) : std::string(" exactly"));
}

void expectBytes(hetcclDataType_t dt, const void* got, const void* want, size_t bytes, const std::string& what) {
  if (bytes == 0 || memcmp(got, want, bytes) == 0) return;
  const size_t es = ref::typeInfo(dt).size;
  const auto* g = static_cast<const uint8_t*>(got);
  const auto* w = static_cast<const uint8_t*>(want);
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < bytes / es; ++i)
    if (memcmp(g + i * es, w + i * es, es) != 0 && bad++ == 0) first = i;
  ADD_FAILURE() << what << ": " << bad << " of " << bytes / es << " elements wrong; first at element " << first
                << ": got " << ref::describeElem(dt, g + first * es) << ", want "
                << ref::describeElem(dt, w + first * es);
}

}  // namespace hmp
