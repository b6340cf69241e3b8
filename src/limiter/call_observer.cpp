#include "limiter/call_observer.hpp"

#include "fleet/fleet_schema.hpp"
#include "redlimit/errors.hpp"

namespace redlimit {

std::string_view to_string(DecisionEventKind kind) noexcept {
  switch (kind) {
    case DecisionEventKind::allowed:
      return "allowed";
    case DecisionEventKind::denied:
      return "denied";
    case DecisionEventKind::waited:
      return "waited";
    case DecisionEventKind::cancelled:
      return "cancelled";
    case DecisionEventKind::failure_policy:
      return "failure_policy";
  }
  return "allowed";
}

namespace detail {
namespace {

bool from_failure_policy(Source source) {
  return source == Source::fallback || source == Source::fail_open || source == Source::fail_closed;
}

/// What ended a call with `error`; none for a Cancelled.
std::optional<CallError> classify(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Cancelled&) {
    return std::nullopt;
  } catch (const InvalidArgument&) {
    return CallError::invalid_argument;
  } catch (const PolicyNotFound&) {
    return CallError::policy_not_found;
  } catch (const Unavailable&) {
    return CallError::unavailable;
  } catch (...) {
    return CallError::other;
  }
}

}  // namespace

CallObserver::CallObserver(LimiterMetrics* metrics, const LimiterOptions& options,
                           std::shared_ptr<spdlog::logger> logger)
    : metrics_(metrics),
      shadow_(options.shadow),
      name_(options.name),
      listener_(options.on_decision),
      logger_(std::move(logger)) {}

void CallObserver::decided(Decision& decision, std::string_view key, std::int64_t permits,
                           std::optional<std::chrono::microseconds> max_wait, bool slept) {
  const bool would_wait = shadow_ && max_wait && !decision.allowed &&
                          !from_failure_policy(decision.source) &&
                          decision.retry_after <= *max_wait;
  if (would_wait) decision.allowed = true;
  if (fleet_ != nullptr) {
    ++fleet_->decided[static_cast<std::size_t>(decision.allowed ? FleetCount::allowed
                                                                : FleetCount::denied)];
    if (from_failure_policy(decision.source))
      ++fleet_->decided[static_cast<std::size_t>(FleetCount::failure_policy)];
  }
  if (metrics_ != nullptr) {
    metrics_->decisions[decision.allowed ? 1 : 0][static_cast<std::size_t>(decision.source)].add();
    if (max_wait) {
      const auto waited = would_wait ? decision.retry_after : decision.waited;
      metrics_->wait_seconds.observe(std::chrono::duration<double>(waited).count());
    }
  }
  if (shadow_ && !decision.allowed) {
    decision.allowed = true;
    decision.shadow_denied = true;
    if (metrics_ != nullptr) metrics_->shadow_denials.add();
    if (fleet_ != nullptr) ++fleet_->decided[static_cast<std::size_t>(FleetCount::shadow_denied)];
  }
  if (!listener_) return;
  DecisionEventKind kind = DecisionEventKind::allowed;
  if (from_failure_policy(decision.source)) {
    kind = DecisionEventKind::failure_policy;
  } else if (!decision.allowed) {
    kind = DecisionEventKind::denied;
  } else if (slept) {
    kind = DecisionEventKind::waited;
  }
  tell(kind, key, permits, &decision);
}

void CallObserver::failed(const std::exception_ptr& error, std::string_view key,
                          std::int64_t permits) {
  const std::optional<CallError> kind = classify(error);
  if (metrics_ != nullptr) {
    if (kind) {
      metrics_->errors[static_cast<std::size_t>(*kind)].add();
    } else {
      metrics_->cancelled.add();
    }
  }
  if (!kind && listener_) tell(DecisionEventKind::cancelled, key, permits, nullptr);
}

void CallObserver::tell(DecisionEventKind kind, std::string_view key, std::int64_t permits,
                        const Decision* decision) const {
  try {
    listener_(DecisionEvent{
        .kind = kind, .limiter = name_, .key = key, .permits = permits, .decision = decision});
  } catch (const std::exception& error) {
    logger_->error("redlimit: limiter '{}': the decision listener threw: {}", name_, error.what());
  } catch (...) {
    logger_->error("redlimit: limiter '{}': the decision listener threw", name_);
  }
}

}  // namespace detail
}  // namespace redlimit
