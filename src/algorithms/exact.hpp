#pragma once
// Exact integer helpers shared by the algorithm models. They mirror lua/lib/exact.lua: the
// script computes the same values with doubles kept at or below 2^52, so both give identical
// results on every input the limiter accepts.

#include <cstdint>

#include "redlimit/limit.hpp"

namespace redlimit::detail {

/// A 128-bit integer for exact products of two 64-bit values (a GCC/Clang extension).
__extension__ typedef __int128 Int128;

/// The largest integer any script value may reach (doubles hold integers exactly up to 2^53).
inline constexpr std::int64_t max_exact = std::int64_t{1} << 52;

/// floor(a / b) for a >= 0, b > 0.
constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept {
  return a / b;
}

/// ceil(a / b) for a >= 0, b > 0.
constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) noexcept {
  return a / b + (a % b != 0 ? 1 : 0);
}

/// floor(a / b) for any a, b > 0 (rounds a negative quotient down, as Lua's floor does).
constexpr std::int64_t floor_div_signed(std::int64_t a, std::int64_t b) noexcept {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/// floor(a * b / c) and its remainder, without overflow, for a, b >= 0 and c > 0.
struct MulDiv {
  std::int64_t quotient;
  std::int64_t remainder;
};
inline MulDiv mul_div(std::int64_t a, std::int64_t b, std::int64_t c) noexcept {
  const Int128 product = static_cast<Int128>(a) * b;
  return {static_cast<std::int64_t>(product / c), static_cast<std::int64_t>(product % c)};
}

/// ceil(a * b / c) for a, b >= 0 and c > 0.
inline std::int64_t mul_div_ceil(std::int64_t a, std::int64_t b, std::int64_t c) noexcept {
  const MulDiv r = mul_div(a, b, c);
  return r.quotient + (r.remainder > 0 ? 1 : 0);
}

/// What the permits `available` of a state stamped with a capacity `old_cap` become under a
/// capacity `new_cap` (lua/lib/carry_permits.lua): as_is min(available, new_cap), proportional
/// floor(available x new_cap / old_cap) (a debt stays a debt), reset new_cap.
inline std::int64_t carry_permits(std::int64_t available, std::int64_t old_cap,
                                  std::int64_t new_cap, Carry carry) noexcept {
  std::int64_t carried = available;
  if (carry == Carry::reset) {
    carried = new_cap;
  } else if (carry == Carry::proportional) {
    const MulDiv scaled = mul_div(available < 0 ? -available : available, new_cap, old_cap);
    carried = available < 0 ? -scaled.quotient - (scaled.remainder > 0 ? 1 : 0) : scaled.quotient;
  }
  return carried < new_cap ? carried : new_cap;
}

/// A time with a fraction of a microsecond: us + frac / den, 0 <= frac < den. The GCRA and
/// leaky bucket models keep their emission interval d/p exactly this way.
struct FracTime {
  std::int64_t us = 0;
  std::int64_t frac = 0;

  friend constexpr bool operator==(const FracTime&, const FracTime&) = default;
  friend constexpr bool operator<(const FracTime& a, const FracTime& b) noexcept {
    return a.us < b.us || (a.us == b.us && a.frac < b.frac);
  }
  friend constexpr bool operator<=(const FracTime& a, const FracTime& b) noexcept {
    return !(b < a);
  }
  /// Whole microseconds, rounded up.
  constexpr std::int64_t ceil_us() const noexcept { return us + (frac > 0 ? 1 : 0); }
};

/// n * d / p as a FracTime in 1/p microseconds.
constexpr FracTime scaled(std::int64_t n, std::int64_t d, std::int64_t p) noexcept {
  const std::int64_t x = n * d;
  return {x / p, x % p};
}

/// a + b, both in 1/p microseconds.
constexpr FracTime add(FracTime a, FracTime b, std::int64_t p) noexcept {
  FracTime sum{a.us + b.us, a.frac + b.frac};
  if (sum.frac >= p) {
    sum.us += 1;
    sum.frac -= p;
  }
  return sum;
}

/// a - b for a >= b, both in 1/p microseconds.
constexpr FracTime subtract(FracTime a, FracTime b, std::int64_t p) noexcept {
  FracTime difference{a.us - b.us, a.frac - b.frac};
  if (difference.frac < 0) {
    difference.us -= 1;
    difference.frac += p;
  }
  return difference;
}

}  // namespace redlimit::detail
