#include "redis/backoff.hpp"

#include <algorithm>

namespace redlimit::detail {

Backoff::Backoff(std::chrono::milliseconds min, std::chrono::milliseconds max, std::uint64_t seed)
    : min_(min), max_(std::max(min, max)), random_(seed) {}

std::chrono::milliseconds Backoff::next() {
  const int doublings = std::min(failures_, 40);
  ++failures_;
  const std::int64_t min = min_.count();
  const std::int64_t cap = std::min<std::int64_t>(max_.count(), min << doublings);
  const std::int64_t low = std::max(min, cap / 2);
  std::uniform_int_distribution<std::int64_t> pick(low, std::max(low, cap));
  return std::chrono::milliseconds(pick(random_));
}

}  // namespace redlimit::detail
