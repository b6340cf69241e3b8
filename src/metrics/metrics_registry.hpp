#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "metrics/instruments.hpp"

namespace redlimit::detail {

/// What a Metrics object holds: the counters of each limiter name, and of the Redis clients.
class MetricsRegistry {
 public:
  /// The counters of `name`, made on first use; stable for the registry's life.
  LimiterMetrics& limiter(std::string_view name);
  RedisMetrics& redis() noexcept { return redis_; }
  MetricsSnapshot snapshot() const;

 private:
  mutable std::mutex mutex_;  ///< guards limiters_ (not the counters: they are atomic)
  std::map<std::string, std::unique_ptr<LimiterMetrics>, std::less<>> limiters_;
  RedisMetrics redis_;
};

}  // namespace redlimit::detail
