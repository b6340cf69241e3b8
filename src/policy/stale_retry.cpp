#include "policy/stale_policy.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

std::optional<StalePolicy> stale_refusal(const std::exception_ptr& error) {
  if (!error) return std::nullopt;
  try {
    std::rethrow_exception(error);
  } catch (const StalePolicy& stale) {
    return stale;
  } catch (...) {
    return std::nullopt;
  }
}

void StaleRetry::refused(const StalePolicy& stale, std::string_view name) {
  const std::size_t claim = stale.claim();
  if (stop_.stop_requested()) throw Cancelled("acquire cancelled while waiting");
  (claim == 0 ? first_ : others_.at(claim - 1)) = stale.stored_version();
  if (Clock::now() >= deadline_) {
    throw TimeoutError("the policy stored under '" + std::string(name) +
                       "' is older than version " + std::to_string(stale.stored_version()) +
                       ", under which a key was written, until the call's deadline");
  }
}

}  // namespace redlimit::detail
