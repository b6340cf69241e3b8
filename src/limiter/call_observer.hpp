#pragma once

#include <spdlog/spdlog.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <string_view>

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

  /// A call ended with `decision` (of acquire() when `acquire`, which suspended to wait for
  /// its permits when `slept`): counts it, makes a shadow denial an admission, tells the
  /// listener.
  void decided(Decision& decision, std::string_view key, std::int64_t permits, bool acquire,
               bool slept);
  /// A call ended with `error` (rethrown by the caller): counts it; a Cancelled is told.
  void failed(const std::exception_ptr& error, std::string_view key, std::int64_t permits);

 private:
  void tell(DecisionEventKind kind, std::string_view key, std::int64_t permits,
            const Decision* decision) const;

  LimiterMetrics* metrics_;
  bool shadow_;
  std::string name_;
  DecisionListener listener_;
  std::shared_ptr<spdlog::logger> logger_;
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
