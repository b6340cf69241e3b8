#pragma once
// Latency samples and their percentiles.

#include <algorithm>
#include <cstdint>
#include <vector>

/// Nanosecond samples of one run.
class Latencies {
 public:
  void reserve(std::size_t n) { samples_.reserve(n); }
  void add(std::int64_t ns) { samples_.push_back(ns); }
  std::size_t count() const noexcept { return samples_.size(); }
  /// The q-quantile (0 <= q <= 1) in microseconds, nearest rank; 0 without samples. Sorts.
  double quantile_us(double q) {
    if (samples_.empty()) return 0;
    if (!sorted_) std::sort(samples_.begin(), samples_.end());
    sorted_ = true;
    const auto rank = static_cast<std::size_t>(q * static_cast<double>(samples_.size() - 1) + 0.5);
    return static_cast<double>(samples_[rank]) / 1000.0;
  }

 private:
  std::vector<std::int64_t> samples_;
  bool sorted_ = false;
};
