// The calls of a Limiter that follows a PolicyStore: each asks under the stored policy for its
// key, and asks again under the policy read again when a script finds the key's state written
// under a newer version (StalePolicy).

#include "limiter/policy_enforcer.hpp"
#include "limiter/stale_policy.hpp"
#include "limiter/validation.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

using Clock = std::chrono::steady_clock;

/// The end of a follower's call: asking again after StalePolicy stops there.
Clock::time_point call_deadline(const CommandDispatcher& redis) {
  return Clock::now() + redis.options().command_timeout;
}

[[noreturn]] void throw_still_stale(const std::string& name, std::int64_t stored_version) {
  throw TimeoutError("the policy stored under '" + name + "' is older than version " +
                     std::to_string(stored_version) +
                     ", under which a key was written, until the call's deadline");
}

}  // namespace

void PolicyEnforcer::follow(const FollowedPolicies& followed) {
  if (followed.version == followed_version_) return;
  followed_version_ = followed.version;
  policy_ = followed.policy;
  // Why: a denial remembered under the previous policy may not hold under this one.
  ++generation_;
  deny_cache_.clear();
}

Task<DecideRequest> PolicyEnforcer::followed_request(std::shared_ptr<PolicyEnforcer> self,
                                                     std::string key, Operation operation,
                                                     std::int64_t permits,
                                                     std::int64_t min_version) {
  check_key(key);
  std::shared_ptr<const FollowedPolicies> followed;
  std::string unread;
  try {
    followed = co_await PolicyFollower::current(self->follower_, min_version);
  } catch (const std::exception& e) {
    unread = e.what();
  }
  if (!followed) {
    throw PolicyNotFound("no policy of '" + self->options_.name +
                         "' could be read from its PolicyStore yet: " + unread);
  }
  self->follow(*followed);
  const std::shared_ptr<const CompiledPolicy>& policy = followed->for_key(key);
  if (!policy) {
    throw PolicyNotFound("no policy is stored under '" + self->options_.name +
                         "' (PolicyStore::set), nor an override for the key");
  }
  co_return self->request_under(policy, key, operation, permits);
}

Task<Decision> PolicyEnforcer::decide_following(std::shared_ptr<PolicyEnforcer> self,
                                                std::string key, Operation operation,
                                                std::int64_t permits) {
  const auto deadline = call_deadline(*self->redis_);
  std::int64_t min_version = 0;
  for (;;) {
    DecideRequest request = co_await followed_request(self, key, operation, permits, min_version);
    try {
      Decision decision = co_await self->decide(request, nullptr);  // self keeps the enforcer
      decision.policy_version = request.policy->epoch().version;
      co_return decision;
    } catch (const StalePolicy& stale) {
      min_version = stale.stored_version();
    }
    if (Clock::now() >= deadline) throw_still_stale(self->options_.name, min_version);
  }
}

Task<Decision> PolicyEnforcer::acquire_following(std::shared_ptr<PolicyEnforcer> self,
                                                 std::string key, std::int64_t permits,
                                                 OwnedAcquireOptions options) {
  check_max_wait(options.max_wait);
  if (options.stop.stop_requested()) throw Cancelled("acquire cancelled before it started");
  const auto deadline = call_deadline(*self->redis_);
  std::int64_t min_version = 0;
  for (;;) {
    DecideRequest request =
        co_await followed_request(self, key, Operation::acquire, permits, min_version);
    const std::int64_t version = request.policy->epoch().version;
    const bool reservable = request.policy->limits().size() == 1 &&
                            can_reserve(request.policy->limits().front().limit.algorithm);
    try {
      Decision decision = reservable
                              ? co_await self->acquire_by_reserving(std::move(request), options)
                              : co_await self->acquire_by_retrying(std::move(request), options);
      decision.policy_version = version;
      co_return decision;
    } catch (const StalePolicy& stale) {
      min_version = stale.stored_version();
    }
    if (Clock::now() >= deadline) throw_still_stale(self->options_.name, min_version);
  }
}

}  // namespace redlimit::detail
