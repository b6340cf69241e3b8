#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "redlimit/metrics.hpp"

namespace redlimit::detail {

/// A count that only grows. Why relaxed atomics: each value is read on its own, and a snapshot
/// may be taken from another thread than the loop's.
class Counter {
 public:
  void add(std::uint64_t n = 1) noexcept { value_.fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

/// A value that goes up and down.
class Gauge {
 public:
  void add(std::int64_t n) noexcept { value_.fetch_add(n, std::memory_order_relaxed); }
  std::int64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> value_{0};
};

/// Observations counted into fixed buckets (upper bounds, ascending; +Inf is implied).
class Histogram {
 public:
  /// `upper_bounds` must outlive the histogram (a static array).
  explicit Histogram(std::span<const double> upper_bounds);
  void observe(double value) noexcept;
  HistogramSnapshot snapshot() const;

 private:
  std::span<const double> upper_bounds_;
  std::vector<std::atomic<std::uint64_t>> buckets_;  ///< per bound, then +Inf; not cumulative
  std::atomic<std::uint64_t> count_{0};
  std::atomic<double> sum_{0};
};

/// The counters of the limiters of one name (LimiterStats as it is counted).
struct LimiterMetrics {
  explicit LimiterMetrics(std::string name_);

  const std::string name;
  std::array<std::array<Counter, source_count>, 2> decisions;  ///< [allowed][source]
  Counter shadow_denials;
  Counter cancelled;
  Counter late_admissions;
  std::array<Counter, call_error_count> errors;
  Histogram wait_seconds;
  Gauge in_flight;
  Gauge waiters;

  /// The bounds of wait_seconds: 1 ms to 60 s.
  static const std::array<double, 14> wait_bounds;

  /// Shows the policy in force: its version (0 for a policy given in code) and its limits.
  void show_policy(std::int64_t version, std::vector<Limit> limits);
  /// Copies what show_policy() showed last into `stats`.
  void shown_policy(LimiterStats& stats) const;

 private:
  /// Why a mutex: a policy is not one atomic value, and a snapshot may be taken from another
  /// thread than the loop's.
  mutable std::mutex policy_mutex_;
  std::int64_t policy_version_ = 0;
  std::vector<Limit> policy_limits_;
};

/// The counters of the Redis clients (RedisStats as it is counted).
struct RedisMetrics {
  RedisMetrics();

  Counter round_trips;
  std::array<Counter, redis_error_count> errors;
  Counter reconnects;
  Counter scripts_loaded;
  Counter replica_shortfalls;
  Histogram batch_size;
  Gauge commands_in_flight;
  std::array<Gauge, 3> breakers;  ///< by BreakerState

  /// The bounds of batch_size: 1, 2, 4, ... 1024 (max_batch_limit).
  static const std::array<double, 11> batch_bounds;
};

}  // namespace redlimit::detail
