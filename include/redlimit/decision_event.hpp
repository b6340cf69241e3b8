#pragma once
/// @file decision_event.hpp
/// DecisionEvent: what a limiter tells its listener (LimiterOptions::on_decision) about each call.

#include <cstdint>
#include <functional>
#include <string_view>

#include "redlimit/limit.hpp"

namespace redlimit {

/// How a call of try_acquire() or acquire() ended.
enum class DecisionEventKind {
  allowed,         ///< allowed without waiting (also a shadow limiter's would-be denial, and
                   ///< its acquire() that would have waited)
  denied,          ///< denied by the limit (by Redis, the deny cache or the local backend)
  waited,          ///< acquire(): allowed after suspending to wait for its permits
  cancelled,       ///< acquire(): ended by its stop token; no decision (an abandoned call, its
                   ///< task destroyed, is not told)
  failure_policy,  ///< Redis could not answer; the failure policy answered (allowed or not)
};
/// The name of `kind` ("allowed", ...).
std::string_view to_string(DecisionEventKind kind) noexcept;

/// One call's end, as the listener sees it. The views and the pointer are valid only during
/// the listener's call.
struct DecisionEvent {
  DecisionEventKind kind = DecisionEventKind::allowed;
  std::string_view limiter;  ///< the limiter's name
  std::string_view key;      ///< the caller's key
  std::int64_t permits = 1;
  /// The decision the caller gets; null for `cancelled`. For a claim of try_acquire_all() or
  /// acquire_all(), its server_time_us is the Redis time that claim's own key used.
  const Decision* decision = nullptr;
};

/// Called on the loop's thread when a call ends, before its caller resumes. It must not throw
/// (an exception is logged and dropped) and should be quick: it runs on every decision.
using DecisionListener = std::function<void(const DecisionEvent&)>;

}  // namespace redlimit
