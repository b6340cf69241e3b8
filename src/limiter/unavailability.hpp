#pragma once

#include <chrono>
#include <exception>

#include "redis/reply_convert.hpp"
#include "redlimit/errors.hpp"

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

}  // namespace redlimit::detail
