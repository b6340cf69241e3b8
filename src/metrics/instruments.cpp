#include "metrics/instruments.hpp"

#include <algorithm>

namespace redlimit::detail {

Histogram::Histogram(std::span<const double> upper_bounds)
    : upper_bounds_(upper_bounds), buckets_(upper_bounds.size() + 1) {}

void Histogram::observe(double value) noexcept {
  const auto bucket = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value);
  buckets_[static_cast<std::size_t>(bucket - upper_bounds_.begin())].fetch_add(
      1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

HistogramSnapshot Histogram::snapshot() const {
  HistogramSnapshot out;
  out.upper_bounds.assign(upper_bounds_.begin(), upper_bounds_.end());
  out.upper_bounds.push_back(std::numeric_limits<double>::infinity());
  std::uint64_t cumulative = 0;
  for (const auto& bucket : buckets_) {
    cumulative += bucket.load(std::memory_order_relaxed);
    out.cumulative_counts.push_back(cumulative);
  }
  // Why the buckets' total, not count_: read one after the other, the two may differ by
  // observations made in between, and Prometheus expects count to equal the +Inf bucket.
  out.count = cumulative;
  out.sum = sum_.load(std::memory_order_relaxed);
  return out;
}

const std::array<double, 14> LimiterMetrics::wait_bounds{
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60};

LimiterMetrics::LimiterMetrics(std::string name_)
    : name(std::move(name_)), wait_seconds(wait_bounds) {}

void LimiterMetrics::show_policy(std::int64_t version, std::vector<Limit> limits) {
  const std::lock_guard lock(policy_mutex_);
  policy_version_ = version;
  policy_limits_ = std::move(limits);
}

void LimiterMetrics::shown_policy(LimiterStats& stats) const {
  const std::lock_guard lock(policy_mutex_);
  stats.policy_version = policy_version_;
  stats.policy_limits = policy_limits_;
}

const std::array<double, 11> RedisMetrics::batch_bounds{1,  2,   4,   8,   16,  32,
                                                        64, 128, 256, 512, 1024};

RedisMetrics::RedisMetrics() : batch_size(batch_bounds) {}

}  // namespace redlimit::detail
