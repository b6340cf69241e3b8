#pragma once

#include <cstddef>
#include <cstdint>

#include "metrics/instruments.hpp"

namespace redlimit::detail {

/// How many commands of one connection wait for a connection or a reply, mirrored into a gauge
/// (RedisMetrics::commands_in_flight) that several connections add up in. What is still counted
/// when it is destroyed (a client destroyed before close() finished) is taken back from the
/// gauge, so the gauge returns to what the other connections count.
class PendingCount {
 public:
  /// `gauge` may be null (counts here only); it must outlive this object.
  explicit PendingCount(Gauge* gauge) noexcept : gauge_(gauge) {}
  ~PendingCount() {
    if (gauge_ != nullptr && count_ > 0) gauge_->add(-static_cast<std::int64_t>(count_));
  }
  PendingCount(const PendingCount&) = delete;
  PendingCount& operator=(const PendingCount&) = delete;

  void increment() noexcept {
    ++count_;
    if (gauge_ != nullptr) gauge_->add(1);
  }
  void decrement() noexcept {
    --count_;
    if (gauge_ != nullptr) gauge_->add(-1);
  }
  std::size_t value() const noexcept { return count_; }

 private:
  Gauge* gauge_;
  std::size_t count_ = 0;
};

}  // namespace redlimit::detail
