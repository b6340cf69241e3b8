#include "redis/breaker_scope.hpp"

#include <spdlog/spdlog.h>

#include <string>
#include <tuple>
#include <utility>

#include "redis/reply_convert.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

/// What a failure says, and whether the command it failed may have run.
std::pair<std::string, bool> cause_of(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const Unavailable& e) {
    return {e.what(), e.maybe_executed()};
  } catch (const std::exception& e) {
    return {e.what(), false};
  }
}

}  // namespace

BreakerScope::BreakerScope(CircuitBreaker& breaker, spdlog::logger& logger)
    : breaker_(&breaker), logger_(&logger) {
  // Why the clock only when not closed: a clock reading is a noticeable part of a decision's
  // client CPU, and a closed breaker needs none.
  if (!breaker.open()) return;
  const auto now = Clock::now();
  if (breaker.allow(now)) return;
  throw CircuitOpen(
      "redis " + breaker.server() + ": recent calls failed; not sent (circuit breaker open)",
      std::chrono::ceil<std::chrono::microseconds>(breaker.retry_in(now)));
}

void BreakerScope::answered() {
  if (breaker_ == nullptr) return;
  if (breaker_->open()) {
    logger_->info("redis {}: answers again; circuit breaker closed", breaker_->server());
  }
  breaker_->success();
}

void BreakerScope::leave(std::exception_ptr& failure, const Reply& reply) {
  if (breaker_ == nullptr) return;
  const bool unavailable =
      failure ? means_unavailable(failure)
              : reply.type == Reply::Type::error && is_transient(classify_error_reply(reply.str));
  if (!unavailable) {
    answered();
    return;
  }
  const bool was_open = breaker_->open();
  const auto now = Clock::now();
  breaker_->failure(now);
  if (!breaker_->open()) return;
  std::string cause = reply.str;
  bool maybe_executed = false;
  if (failure) std::tie(cause, maybe_executed) = cause_of(failure);
  const auto retry_after = std::chrono::ceil<std::chrono::microseconds>(breaker_->retry_in(now));
  const std::string& server = breaker_->server();
  if (!was_open) {
    logger_->warn(
        "redis {}: unavailable ({}); script calls fail at once for {} ms (circuit breaker open)",
        server, cause, std::chrono::ceil<std::chrono::milliseconds>(retry_after).count());
  }
  // Why replace the error: the caller learns when the server will be tried again.
  failure = std::make_exception_ptr(CircuitOpen(
      "redis " + server + ": " + cause + " (circuit breaker open)", retry_after, maybe_executed));
}

}  // namespace redlimit::detail
