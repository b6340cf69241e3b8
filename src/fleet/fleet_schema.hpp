#pragma once
// The fleet's decision counts in Redis: what StatsPublisher writes and read_fleet_counts() reads
// (their keys are in policy/key_format.hpp).

#include <array>
#include <chrono>
#include <string_view>

namespace redlimit::detail {

/// The fields of a name's hash of fleet counts, in the order of LimiterMetrics::published.
enum class FleetCount { allowed, denied, shadow_denied, failure_policy };

/// The field names, by FleetCount.
inline constexpr std::array<std::string_view, 4> fleet_count_fields{
    "allowed", "denied", "shadow_denied", "failure_policy"};

/// How long a name's counts (its hash, and its entry in the set of names) stay after its last
/// publication: a name nobody decides on any more disappears.
inline constexpr std::chrono::hours fleet_counts_ttl{24};

}  // namespace redlimit::detail
