#include "stats_reading.hpp"

#include <cstdint>

#include "redlimit/fleet_counts.hpp"

namespace redlimit_cli {
namespace {

/// `count` as a DecisionCounts value (a count beyond int64 is clamped: no fleet gets there).
std::int64_t signed_count(std::uint64_t count) {
  constexpr auto largest = static_cast<std::uint64_t>(INT64_MAX);
  return static_cast<std::int64_t>(count > largest ? largest : count);
}

}  // namespace

redlimit::Task<CountsByName> read_counts(redlimit::Client& client, std::string prefix,
                                         std::vector<std::string> names) {
  if (names.empty()) names = co_await redlimit::fleet_limiter_names(client, prefix);
  const std::vector<redlimit::FleetCounts> read =
      co_await redlimit::read_fleet_counts(client, std::move(names), std::move(prefix));
  CountsByName counts;
  for (const redlimit::FleetCounts& one : read) {
    counts[one.name] = DecisionCounts{.allowed = signed_count(one.allowed),
                                      .denied = signed_count(one.denied),
                                      .shadow_denied = signed_count(one.shadow_denied),
                                      .failure_policy = signed_count(one.failure_policy)};
  }
  co_return counts;
}

}  // namespace redlimit_cli
