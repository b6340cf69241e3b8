#pragma once
// How the window algorithms carry a stored count over to changed parameters
// (docs/algorithms.md, "Changing a policy"); carried_count has a twin in
// lua/lib/carried_count.lua.

#include <cstdint>

#include "algorithms/exact.hpp"
#include "algorithms/stamp.hpp"

namespace redlimit::detail {

/// A count admitted under a limit of `old_limit`, as it counts under `new_limit`: kept as is,
/// scaled by new_limit / old_limit rounding up, or zeroed.
inline std::int64_t carried_count(std::int64_t count, std::int64_t old_limit,
                                  std::int64_t new_limit, Carry carry) noexcept {
  switch (carry) {
    case Carry::as_is:
      return count;
    case Carry::proportional:
      return mul_div_ceil(count, new_limit, old_limit);
    case Carry::reset:
      return 0;
  }
  return count;
}

/// Whether [a_start, a_start + a_length) and [b_start, b_start + b_length) share a time.
constexpr bool windows_overlap(std::int64_t a_start, std::int64_t a_length, std::int64_t b_start,
                               std::int64_t b_length) noexcept {
  return a_start < b_start + b_length && b_start < a_start + a_length;
}

}  // namespace redlimit::detail
