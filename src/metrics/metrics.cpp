#include "redlimit/metrics.hpp"

#include <tuple>

#include "metrics/metrics_registry.hpp"

namespace redlimit {

// Why: the counters are arrays indexed by these enums; an enum that grows must grow them.
static_assert(static_cast<std::size_t>(Source::fail_closed) + 1 == source_count);
static_assert(static_cast<std::size_t>(CallError::other) + 1 == call_error_count);
static_assert(static_cast<std::size_t>(RedisError::protocol) + 1 == redis_error_count);
static_assert(static_cast<std::size_t>(BreakerState::half_open) + 1 ==
              std::tuple_size_v<decltype(RedisStats::breakers)>);

namespace detail {
namespace {

LimiterStats stats_of(const LimiterMetrics& counters) {
  LimiterStats stats;
  stats.name = counters.name;
  for (std::size_t allowed = 0; allowed < 2; ++allowed) {
    for (std::size_t source = 0; source < source_count; ++source) {
      stats.decisions[allowed][source] = counters.decisions[allowed][source].value();
    }
  }
  stats.shadow_denials = counters.shadow_denials.value();
  stats.cancelled = counters.cancelled.value();
  stats.late_admissions = counters.late_admissions.value();
  for (std::size_t error = 0; error < call_error_count; ++error) {
    stats.errors[error] = counters.errors[error].value();
  }
  stats.wait_seconds = counters.wait_seconds.snapshot();
  stats.in_flight = counters.in_flight.value();
  stats.waiters = counters.waiters.value();
  counters.shown_policy(stats);
  return stats;
}

RedisStats stats_of(const RedisMetrics& counters) {
  RedisStats stats;
  stats.round_trips = counters.round_trips.value();
  for (std::size_t error = 0; error < redis_error_count; ++error) {
    stats.errors[error] = counters.errors[error].value();
  }
  stats.reconnects = counters.reconnects.value();
  stats.scripts_loaded = counters.scripts_loaded.value();
  stats.replica_shortfalls = counters.replica_shortfalls.value();
  stats.batch_size = counters.batch_size.snapshot();
  stats.commands_in_flight = counters.commands_in_flight.value();
  for (std::size_t state = 0; state < stats.breakers.size(); ++state) {
    stats.breakers[state] = counters.breakers[state].value();
  }
  return stats;
}

}  // namespace

LimiterMetrics& MetricsRegistry::limiter(std::string_view name) {
  const std::lock_guard lock(mutex_);
  auto found = limiters_.find(name);
  if (found == limiters_.end()) {
    found =
        limiters_.emplace(std::string(name), std::make_unique<LimiterMetrics>(std::string(name)))
            .first;
  }
  return *found->second;
}

MetricsSnapshot MetricsRegistry::snapshot() const {
  MetricsSnapshot out;
  {
    const std::lock_guard lock(mutex_);
    for (const auto& [name, counters] : limiters_)
      out.limiters.push_back(stats_of(*counters));
  }
  out.redis = stats_of(redis_);
  return out;
}

}  // namespace detail

Metrics::Metrics() : registry_(std::make_unique<detail::MetricsRegistry>()) {}
Metrics::~Metrics() = default;

MetricsSnapshot Metrics::snapshot() const {
  return registry_->snapshot();
}

std::string Metrics::prometheus_text() const {
  return redlimit::prometheus_text(snapshot());
}

detail::LimiterMetrics& Metrics::limiter(std::string_view name) {
  return registry_->limiter(name);
}

detail::RedisMetrics& Metrics::redis() noexcept {
  return registry_->redis();
}

}  // namespace redlimit
