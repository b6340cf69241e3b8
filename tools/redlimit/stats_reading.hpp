#pragma once
// Reading the fleet's decision counts from Redis, for `redlimit watch`.

#include <string>
#include <vector>

#include "decision_rates.hpp"
#include "redlimit/client.hpp"
#include "redlimit/task.hpp"

namespace redlimit_cli {

/// The counts of the limiters `names` (those without counts have zeros), or with no names, of
/// every limiter whose counts were published under `prefix` (redlimit::fleet_limiter_names()).
redlimit::Task<CountsByName> read_counts(redlimit::Client& client, std::string prefix,
                                         std::vector<std::string> names);

}  // namespace redlimit_cli
