#pragma once
// `redlimit top NAME`: the keys of a limiter nearest their limits.

#include <cstddef>
#include <stop_token>
#include <string>
#include <vector>

#include "command_runner.hpp"
#include "key_sample.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/task.hpp"

namespace redlimit_cli {

/// One key of a `top` listing: every limit's state, as Limiter::inspect() reads it.
struct KeyState {
  std::string key;
  std::vector<redlimit::LimitState> limits;
  /// The limit with the least left (remaining / capacity; then the longer retry_after).
  std::size_t nearest = 0;
};

/// The index of the limit of `limits` with the least left (see KeyState::nearest).
std::size_t nearest_limit(const std::vector<redlimit::LimitState>& limits);

/// The keys nearest their limits first: by their nearest limit's remaining / capacity
/// ascending, then by the longer retry_after of the key (its longest limit's), then by key.
void sort_nearest_first(std::vector<KeyState>& keys);

/// What `top` was asked for.
struct TopRequest {
  std::string name;
  std::size_t count = 10;  ///< rows printed
  SampleBounds sample;     ///< which keys are looked at
};

/// Samples keys of the limiter by SCAN (request.sample), inspects each through a limiter that
/// follows the stored policy, and prints the request.count nearest their limits. A stop (SIGINT)
/// ends the inspection: only the keys inspected are listed. On a Redis Cluster URL: exit_usage
/// (SCAN would have to visit every node).
redlimit::Task<int> top_keys(redlimit::Client& client, GlobalOptions global, TopRequest request,
                             std::stop_token stop);

}  // namespace redlimit_cli
