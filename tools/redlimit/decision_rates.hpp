#pragma once
// What `redlimit watch` computes: decisions per second from two readings of the fleet's counts.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace redlimit_cli {

/// A limiter's decision counts, added up by every client of the fleet in Redis
/// (`<prefix>:stats:{<name>}`), since the hash was created.
struct DecisionCounts {
  std::int64_t allowed = 0;
  std::int64_t denied = 0;
  std::int64_t shadow_denied = 0;
  std::int64_t failure_policy = 0;
  friend bool operator==(const DecisionCounts&, const DecisionCounts&) = default;
};

/// One reading: counts per limiter name.
using CountsByName = std::map<std::string, DecisionCounts>;

/// Per second between two readings.
struct DecisionRates {
  double decisions = 0;  ///< allowed and denied
  double denied = 0;
  double shadow_denied = 0;
  double failure_policy = 0;
  /// denied / decisions, in percent; nullopt when there was no decision.
  std::optional<double> denied_percent;
};

/// A row of `watch`.
struct LimiterActivity {
  std::string name;
  /// The counts at the later reading.
  DecisionCounts totals;
  /// Nullopt when the counts went back between the readings (the hash was removed and made
  /// again): no rate can be told.
  std::optional<DecisionRates> rates;
};

/// The activity of every name of `after`, in name order, over the `seconds` since `before`. A
/// name missing from `before` had no hash then: its counts started from zero.
std::vector<LimiterActivity> activity_between(const CountsByName& before, const CountsByName& after,
                                              double seconds);

/// The sum of `rows`, named "(all)": the totals of all, the rates of those that have one (zeros
/// for no rows; nullopt when rows have none).
LimiterActivity total_of(const std::vector<LimiterActivity>& rows);

}  // namespace redlimit_cli
