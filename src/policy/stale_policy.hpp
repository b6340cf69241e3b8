#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "redlimit/task.hpp"

namespace redlimit::detail {

/// A script refused a request: a key it touches was written under a newer stored policy than
/// the request's. A following limiter reads the policy again and asks once more.
class StalePolicy : public std::runtime_error {
 public:
  explicit StalePolicy(std::int64_t stored_version, std::size_t claim = 0)
      : std::runtime_error("a key holds state of policy version " + std::to_string(stored_version) +
                           ", newer than the request's"),
        stored_version_(stored_version),
        claim_(claim) {}
  /// The version the key's state was written under.
  std::int64_t stored_version() const noexcept { return stored_version_; }
  /// Of a decision over several claims (try_acquire_all()): the claim refused.
  std::size_t claim() const noexcept { return claim_; }

 private:
  std::int64_t stored_version_;
  std::size_t claim_;
};

/// How a call asks again when a script refused its request as stale: per claim of the call,
/// the version to read at least, until the call's deadline. Every call asks again by it, in
/// asking_again() or, for try_acquire() and peek(), in decide()'s own frame.
class StaleRetry {
 public:
  using Clock = std::chrono::steady_clock;

  /// For a call of `claims` claims that ends at `deadline`; a refusal after `stop` was
  /// requested ends it cancelled.
  explicit StaleRetry(Clock::time_point deadline, std::size_t claims = 1, std::stop_token stop = {})
      : deadline_(deadline), others_(claims > 1 ? claims - 1 : 0, 0), stop_(std::move(stop)) {}

  /// The version claim `claim`'s policy must have at least (0 before any refusal of it).
  std::int64_t min_version(std::size_t claim = 0) const noexcept {
    return claim == 0 ? first_ : others_[claim - 1];
  }
  Clock::time_point deadline() const noexcept { return deadline_; }
  /// Takes a refusal of claim `stale.claim()` of limiter `name`: its next policy is at least
  /// the refusal's version. Throws Cancelled once stop was requested, TimeoutError past the
  /// deadline.
  void refused(const StalePolicy& stale, std::string_view name);

 private:
  Clock::time_point deadline_;
  // Why the first apart: a call on one key, the common case, allocates nothing.
  std::int64_t first_ = 0;
  std::vector<std::int64_t> others_;
  std::stop_token stop_;
};

/// The refusal `error` is, when it is a StalePolicy: the only place that catches one.
std::optional<StalePolicy> stale_refusal(const std::exception_ptr& error);

/// The ask-again stage of a call: `attempt(retry)` (a Task, under the policies of at least
/// `retry`'s versions), asked again while a script refuses it as stale, until `retry` says
/// when to stop; `name(claim)` names the limiter of a refused claim.
template <class Attempt, class Name>
std::invoke_result_t<Attempt&, const StaleRetry&> asking_again(StaleRetry retry, Attempt attempt,
                                                               Name name) {
  for (;;) {
    std::exception_ptr error;
    try {
      co_return co_await attempt(std::as_const(retry));
    } catch (...) {
      error = std::current_exception();
    }
    const std::optional<StalePolicy> stale = stale_refusal(error);
    if (!stale) std::rethrow_exception(error);
    retry.refused(*stale, name(stale->claim()));
  }
}

}  // namespace redlimit::detail
