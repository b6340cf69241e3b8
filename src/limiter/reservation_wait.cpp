#include "limiter/reservation_wait.hpp"

#include <algorithm>

#include "limiter/policy_enforcer.hpp"
#include "limiter/unavailability.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"

namespace redlimit::detail {
namespace {

using Clock = std::chrono::steady_clock;

/// Renews `part`'s owner lease, reporting into its renewal; the enforcer keeps the backend
/// alive until it ends.
Task<void> renew_beside(std::shared_ptr<PolicyEnforcer> enforcer, Backend* backend,
                        DecideRequest request, std::int64_t version,
                        std::shared_ptr<LeaseRenewal> renewal) {
  (void)enforcer;
  try {
    const std::int64_t expiry = co_await backend->renew_reservation(std::move(request), version);
    renewal->reclaimed = expiry == 0;
    renewal->confirmed = std::max(renewal->confirmed, expiry);
  } catch (...) {
    // Redis could not answer: renewed again at the next turn, or claimed at the wake.
    if (!means_unavailable(std::current_exception())) renewal->error = std::current_exception();
  }
  renewal->in_flight = false;
  if (renewal->wake != nullptr) renewal->wake->request_stop();  // the waiter looks again
}

struct ForwardStop {
  std::stop_source* target;
  void operator()() const noexcept { target->request_stop(); }
};

/// Points every part's wake-ups at `wake_early` for a scope. Why: a notice or a renewal that
/// ends after the sleep (or after the waiter's frame is gone) must not wake it.
class WakeEarly {
 public:
  WakeEarly(std::span<WaitingPart> parts, std::stop_source* wake_early) : parts_(parts) {
    for (WaitingPart& part : parts_) {
      part.waiter->reschedule = wake_early;
      part.renewal->wake = wake_early;
    }
  }
  WakeEarly(const WakeEarly&) = delete;
  WakeEarly& operator=(const WakeEarly&) = delete;
  ~WakeEarly() {
    for (WaitingPart& part : parts_) {
      part.waiter->reschedule = nullptr;
      part.renewal->wake = nullptr;
    }
  }

 private:
  std::span<WaitingPart> parts_;
};

}  // namespace

Task<WaitEnd> sleep_until_due(uv_loop_t* loop, std::span<WaitingPart> parts,
                              std::chrono::microseconds renew_every,
                              const OwnedAcquireOptions& options) {
  auto next_renewal = Clock::now() + renew_every;
  for (;;) {
    for (const WaitingPart& part : parts) {
      if (part.renewal->error) std::rethrow_exception(part.renewal->error);
      if (part.renewal->reclaimed) co_return WaitEnd::reclaimed;
    }
    const auto current = Clock::now();
    auto wake = parts.front().waiter->wake;
    for (const WaitingPart& part : parts)
      wake = std::max(wake, part.waiter->wake);
    if (current >= wake) co_return WaitEnd::due;
    // Why before the slot: a change reaches the waiters (the slot is the old policy's).
    if (!options.stop.stop_requested() &&
        std::any_of(parts.begin(), parts.end(), [](const WaitingPart& part) {
          return part.enforcer->superseded(*part.waits_under, part.key);
        })) {
      co_return WaitEnd::superseded;
    }
    bool renewing = false;
    for (const WaitingPart& part : parts)
      renewing = renewing || (part.unconfirmed() && !part.renewal->in_flight);
    if (renewing && current >= next_renewal) {
      next_renewal = current + renew_every;
      for (WaitingPart& part : parts) {
        if (!part.unconfirmed() || part.renewal->in_flight) continue;
        part.renewal->in_flight = true;
        // Why the client's upkeep, not work for the caller: Client::close() waits for that
        // first, and waiters renewing one after another would hold it for as long as they
        // wait. A renewal the client no longer sends is made good by the check at the wake.
        // Only a part registered in Redis is renewed, so its backend has a client.
        part.backend->background()->start_upkeep(
            renew_beside(part.enforcer, part.backend,
                         part.enforcer->give_back_request(*part.reserved, part.backend, part.key),
                         part.waiter->book.version, part.renewal));
      }
      continue;
    }
    const auto until = renewing ? std::min(wake, next_renewal) : wake;
    std::stop_source wake_early;
    const WakeEarly pointed(parts, &wake_early);
    std::stop_callback<ForwardStop> forward(options.stop, ForwardStop{&wake_early});
    bool woken = false;
    try {
      co_await sleep_for(loop, std::chrono::ceil<std::chrono::microseconds>(until - current),
                         wake_early.get_token());
    } catch (const Cancelled&) {
      woken = true;
    }
    if (woken && options.stop.stop_requested()) co_return WaitEnd::stopped;
  }
}

}  // namespace redlimit::detail
