#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string_view>

#include "fleet/stats_publisher.hpp"
#include "metrics/instruments.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/metrics.hpp"

namespace redlimit::detail {

/// What a limiter does with the end of each try_acquire() and acquire() call: counts it
/// (LimiterMetrics), applies shadow mode (LimiterOptions::shadow) and tells the listener
/// (LimiterOptions::on_decision).
class CallObserver {
 public:
  /// `metrics` (may be null: nothing counted) must outlive this observer.
  CallObserver(LimiterMetrics* metrics, const LimiterOptions& options,
               std::shared_ptr<spdlog::logger> logger);

  /// Whether calls need watching at all: counting, shadow mode or a listener.
  bool active() const noexcept { return metrics_ != nullptr || shadow_ || listener_; }
  /// Whether the listener wants the caller's key (it is kept for it).
  bool wants_key() const noexcept { return static_cast<bool>(listener_); }
  LimiterMetrics* metrics() const noexcept { return metrics_; }
  /// Counts each decision from now on into `tally` too (null: not), for the fleet's counts.
  void count_for_fleet(std::shared_ptr<FleetTally> tally) noexcept { fleet_ = std::move(tally); }

  /// A call ended with `decision` (of acquire() with `max_wait`, which suspended to wait for
  /// its permits when `slept`; of try_acquire() without): counts it (and into the fleet's
  /// tally), applies shadow mode, tells the listener.
  ///
  /// Shadow mode: a denial becomes an admission with `shadow_denied`, except, for acquire()
  /// (which decides once), a denial it would have waited out (retry_after within max_wait, not
  /// from the failure policy): that is counted as allowed and told as DecisionEventKind::allowed
  /// (it did not wait), its retry_after the wait it would have had (observed in wait_seconds).
  void decided(Decision& decision, std::string_view key, std::int64_t permits,
               std::optional<std::chrono::microseconds> max_wait, bool slept);
  /// A call ended with `error` (rethrown by the caller): counts it; a Cancelled is told.
  void failed(const std::exception_ptr& error, std::string_view key, std::int64_t permits);

 private:
  void tell(DecisionEventKind kind, std::string_view key, std::int64_t permits,
            const Decision* decision) const;

  LimiterMetrics* metrics_;
  std::shared_ptr<FleetTally> fleet_;
  bool shadow_;
  std::string name_;
  DecisionListener listener_;
  std::shared_ptr<spdlog::logger> logger_;
};

/// One observed call's presence: in flight while it lasts, and counted as cancelled when its
/// frame goes before the call ended (its task destroyed: abandoned).
class ObservedCall {
 public:
  explicit ObservedCall(LimiterMetrics* metrics) noexcept : metrics_(metrics) {
    if (metrics_ != nullptr) metrics_->in_flight.add(1);
  }
  ~ObservedCall() {
    if (metrics_ == nullptr) return;
    metrics_->in_flight.add(-1);
    if (!ended_) metrics_->cancelled.add();
  }
  ObservedCall(const ObservedCall&) = delete;
  ObservedCall& operator=(const ObservedCall&) = delete;

  /// The call ended, with a decision or an error.
  void end() noexcept { ended_ = true; }

 private:
  LimiterMetrics* metrics_;
  bool ended_ = false;
};

/// Adds one to a gauge for a scope (nothing when the gauge is null), and marks `slept` (if
/// not null): for a waiter, the waiters gauge and OwnedAcquireOptions::slept.
class GaugeScope {
 public:
  explicit GaugeScope(Gauge* gauge, bool* slept = nullptr) noexcept : gauge_(gauge) {
    if (gauge_ != nullptr) gauge_->add(1);
    if (slept != nullptr) *slept = true;
  }
  ~GaugeScope() {
    if (gauge_ != nullptr) gauge_->add(-1);
  }
  GaugeScope(const GaugeScope&) = delete;
  GaugeScope& operator=(const GaugeScope&) = delete;

 private:
  Gauge* gauge_;
};

}  // namespace redlimit::detail
