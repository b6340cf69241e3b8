#pragma once
// `redlimit watch`: the fleet's decisions per second, per limiter name, refreshed in place.

#include <chrono>
#include <stop_token>
#include <string>
#include <vector>

#include "command_runner.hpp"
#include "redlimit/task.hpp"

namespace redlimit_cli {

/// What `watch` was asked for.
struct WatchRequest {
  /// The limiters to show; empty: every one whose counts were published
  /// (redlimit::fleet_limiter_names(), read again at every refresh).
  std::vector<std::string> names;
  std::chrono::milliseconds interval{1000};
  /// One refresh after one interval, then exit.
  bool once = false;
};

/// Reads the counts, then every interval reads them again and shows the rates since the reading
/// before (the first reading is only the base), until a stop request or, with request.once,
/// after one refresh. A refresh Redis does not answer is reported on stderr and skipped (with
/// request.once, it ends the command).
redlimit::Task<int> watch_rates(redlimit::Client& client, GlobalOptions global,
                                WatchRequest request, std::stop_token stop);

}  // namespace redlimit_cli
