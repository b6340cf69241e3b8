#pragma once

#include <algorithm>
#include <chrono>
#include <exception>

#include "redis/reply_convert.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/failure_policy.hpp"
#include "redlimit/limit.hpp"

namespace redlimit::detail {

/// For a call that failed with `error`: rethrows it unless it means Redis could not answer (see
/// means_unavailable), so that only unavailability reaches a failure policy; else returns how
/// long until Redis is tried again (an open circuit breaker's next probe), 0 when unknown.
inline std::chrono::microseconds retry_in_after(const std::exception_ptr& error) {
  if (!means_unavailable(error)) std::rethrow_exception(error);
  try {
    std::rethrow_exception(error);
  } catch (const CircuitOpen& e) {
    return e.retry_after();
  } catch (...) {
    return {};
  }
}

/// What a failure policy answers when Redis could not: one rule for a Limiter's decision and a
/// Semaphore's grant, so that both answer the same situation the same way.
struct FailureAnswer {
  enum class Action {
    allow,         ///< unenforced (fail_open)
    ask_fallback,  ///< the in-process fallback decides (local_fallback)
    deny,          ///< nothing taken; retry_after says when to ask again
  };
  Action action = Action::deny;
  std::chrono::microseconds retry_after{};
  Source source = Source::fail_closed;
};

/// The answer of `policy`; `has_fallback` and `fits_fallback` say whether this process has a
/// local fallback and whether its share could ever grant the request; `retry_in` is when Redis
/// will be tried again (retry_in_after()).
inline FailureAnswer failure_answer(const FailurePolicy& policy, bool has_fallback,
                                    bool fits_fallback, std::chrono::microseconds retry_in) {
  using Action = FailureAnswer::Action;
  switch (policy.kind) {
    case FailurePolicy::fail_open:
      return {Action::allow, {}, Source::fail_open};
    case FailurePolicy::local_fallback:
      if (!has_fallback) break;
      if (fits_fallback) return {Action::ask_fallback, {}, Source::fallback};
      // More than this process's share can ever grant.
      return {Action::deny, std::chrono::milliseconds(1), Source::fallback};
    case FailurePolicy::fail_closed:
      break;
  }
  // When a call will go to Redis again (the breaker's next probe), at least 1 ms.
  return {Action::deny, std::max<std::chrono::microseconds>(retry_in, std::chrono::milliseconds(1)),
          Source::fail_closed};
}

}  // namespace redlimit::detail
