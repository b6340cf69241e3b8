#include "policy/stale_policy.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

void StaleRetry::refused(const StalePolicy& stale, std::string_view name) {
  const std::size_t claim = stale.claim();
  (claim == 0 ? first_ : others_.at(claim - 1)) = stale.stored_version();
  if (Clock::now() >= deadline_) {
    throw TimeoutError("the policy stored under '" + std::string(name) +
                       "' is older than version " + std::to_string(stale.stored_version()) +
                       ", under which a key was written, until the call's deadline");
  }
}

}  // namespace redlimit::detail
