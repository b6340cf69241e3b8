#pragma once
// `redlimit top NAME`: the keys of a limiter nearest their limits.

#include <cstddef>
#include <stop_token>
#include <string>
#include <vector>

#include "command_runner.hpp"
#include "redlimit/limit.hpp"
#include "redlimit/task.hpp"

namespace redlimit_cli {

/// One key of a `top` listing and its state (a peek: the binding limit's).
struct KeyState {
  std::string key;
  redlimit::Decision state;
};

/// The keys nearest their limits first: by remaining / capacity ascending, then by the longer
/// retry_after, then by key.
void sort_nearest_first(std::vector<KeyState>& keys);

/// What `top` was asked for.
struct TopRequest {
  std::string name;
  std::size_t count = 10;     ///< rows printed
  std::size_t sample = 1000;  ///< keys sampled at most
};

/// Samples up to request.sample keys of the limiter by SCAN, peeks each through a limiter that
/// follows the stored policy, and prints the request.count nearest their limits. On a Redis
/// Cluster URL: exit_usage (SCAN would have to visit every node).
redlimit::Task<int> top_keys(redlimit::Client& client, GlobalOptions global, TopRequest request,
                             std::stop_token stop);

}  // namespace redlimit_cli
