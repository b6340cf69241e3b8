#pragma once
// Reading the fleet's decision counts from Redis, for `redlimit watch`.

#include <string>
#include <vector>

#include "decision_rates.hpp"
#include "redlimit/client.hpp"
#include "redlimit/reply.hpp"
#include "redlimit/task.hpp"

namespace redlimit_cli {

/// The counts of an HGETALL reply of a stats hash (fields allowed, denied, shadow_denied,
/// failure_policy; others are ignored, missing ones are 0).
DecisionCounts counts_of(const redlimit::Reply& hash);

/// The counts of the limiters `names` (those without a hash have zeros), or with no names, of
/// every limiter that has a stats hash under `prefix` (found by SCAN: one server only).
redlimit::Task<CountsByName> read_counts(redlimit::Client& client, std::string prefix,
                                         std::vector<std::string> names);

}  // namespace redlimit_cli
