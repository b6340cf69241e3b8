#pragma once
/// @file fleet_counts.hpp
/// The fleet's decision counts: what every client adds up in Redis, per limiter name
/// (ClientOptions::stats_interval), read back for dashboards and `redlimit watch`.

#include <cstdint>
#include <string>
#include <vector>

#include "redlimit/task.hpp"

namespace redlimit {

class Client;

/// The decisions of one limiter name, added up over every client that published them.
struct FleetCounts {
  std::string name;
  /// Decisions the limit allowed, from every source (the failure policy's included).
  std::uint64_t allowed = 0;
  /// Decisions the limit denied, from every source; a shadow limiter's denials included.
  std::uint64_t denied = 0;
  /// Denials that shadow mode (LimiterOptions::shadow) turned into admissions.
  std::uint64_t shadow_denied = 0;
  /// Answers of the failure policy (allowed or not): decisions Redis did not make.
  std::uint64_t failure_policy = 0;
  friend bool operator==(const FleetCounts&, const FleetCounts&) = default;
};

/// The limiter names whose counts some client published under `prefix` in the last day, in
/// order of name. One command (ZRANGE of `<prefix>:stats:names`), also on a Redis Cluster.
/// Throws InvalidArgument for a malformed prefix, before any I/O.
Task<std::vector<std::string>> fleet_limiter_names(Client& client, std::string prefix = "rl");

/// The fleet's counts of each of `names`, in that order; a name without counts has zeros. One
/// HGETALL per name, of `<prefix>:stats:{<escaped name>}`. Throws InvalidArgument for a
/// malformed prefix or name, before any I/O; ProtocolError for a field that is not a count.
Task<std::vector<FleetCounts>> read_fleet_counts(Client& client, std::vector<std::string> names,
                                                 std::string prefix = "rl");

}  // namespace redlimit
