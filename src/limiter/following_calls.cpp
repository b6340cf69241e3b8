// The calls of a Limiter that follows a PolicyStore: each asks under the stored policy for its
// key, and asks again under the policy read again when a script finds the key's state written
// under a newer version (StalePolicy).

#include <optional>

#include "limiter/policy_enforcer.hpp"
#include "limiter/stale_policy.hpp"
#include "limiter/unconfirmed_policy.hpp"
#include "policy/validation.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"

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

[[noreturn]] void throw_older_than_state(const std::string& name, std::string_view key,
                                         std::int64_t state_version, std::int64_t stored_version) {
  throw ConfigError("the stored policy is older than the state of key '" + std::string(key) +
                    "' of '" + name + "': the state was written under version " +
                    std::to_string(state_version) + ", the store holds version " +
                    std::to_string(stored_version) +
                    " for the key (was the policy record lost while the state remained?)");
}

}  // namespace

Decision PolicyEnforcer::answer_unconfirmed(const UnconfirmedPolicy& unconfirmed) {
  // Why no wait before Redis is asked again: the next call reads the policy again at once.
  Decision decision = decide_on_failure(unconfirmed.request(), std::chrono::microseconds{0});
  decision.policy_version = unconfirmed.request().policy->epoch().version;
  return decision;
}

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
                                                     std::int64_t permits, std::int64_t min_version,
                                                     Clock::time_point deadline,
                                                     WhenUnread when_unread) {
  check_key(key);
  // Why at most twice: a key written under a version the store lost makes the store advance
  // its versions once; still older after that is a store this release cannot follow.
  for (bool advanced = false;; advanced = true) {
    std::shared_ptr<const FollowedPolicies> followed;
    std::string unread = "the connection to Redis ended again while it was read";
    std::exception_ptr unread_error;
    try {
      followed = co_await PolicyFollower::current(self->follower_, min_version, deadline);
    } catch (const Unavailable& e) {
      unread = e.what();  // Redis cannot answer: never an allow
      unread_error = std::current_exception();
    }
    if (!followed || !self->follower_->verified(*followed)) {
      // Why not PolicyNotFound when asked again after StalePolicy: a policy was read, and Redis
      // did not answer the read again by the call's deadline.
      if (min_version > 0) {
        if (unread_error) std::rethrow_exception(unread_error);
        throw ConnectionError(unread);
      }
      const std::shared_ptr<const FollowedPolicies>& last =
          followed ? followed : self->follower_->last();
      if (last && last->for_key(key)) {
        throw UnconfirmedPolicy(self->request_under(last->for_key(key), key, operation, permits),
                                unread);
      }
      if (when_unread == WhenUnread::unavailable && unread_error) {
        std::rethrow_exception(unread_error);
      }
      throw PolicyNotFound("no policy of '" + self->options_.name +
                           "' could be read from its PolicyStore yet: " + unread);
    }
    self->follow(*followed);
    const std::shared_ptr<const CompiledPolicy>& policy = followed->for_key(key);
    if (!policy) {
      throw PolicyNotFound("no policy is stored under '" + self->options_.name +
                           "' (PolicyStore::set), nor an override for the key");
    }
    if (policy->epoch().version >= min_version) {
      co_return self->request_under(policy, key, operation, permits);
    }
    // The policy was just read again (a script named a newer version), and the store holds
    // nothing that new for the key: it lost the changes the key's state was written under.
    if (advanced)
      throw_older_than_state(self->options_.name, key, min_version, policy->epoch().version);
    co_await PolicyFollower::advance(self->follower_, key, min_version);
  }
}

Task<DecideRequest> PolicyEnforcer::request_in_force(std::shared_ptr<PolicyEnforcer> self,
                                                     std::string key, Operation operation,
                                                     std::int64_t permits, std::int64_t min_version,
                                                     Clock::time_point deadline) {
  if (!self->follower_) co_return self->request(key, operation, permits);
  co_return co_await followed_request(self, std::move(key), operation, permits, min_version,
                                      deadline, WhenUnread::no_policy);
}

Task<Decision> PolicyEnforcer::decide_following(std::shared_ptr<PolicyEnforcer> self,
                                                std::string key, Operation operation,
                                                std::int64_t permits) {
  const auto deadline = call_deadline(*self->redis_);
  std::int64_t min_version = 0;
  for (;;) {
    // Why the synchronous way first: in the common case the policy read last is current, and
    // building the request needs no coroutine of its own.
    std::optional<DecideRequest> ready;
    if (auto followed = min_version == 0 ? self->follower_->ready() : nullptr) {
      self->follow(*followed);
      if (const auto& policy = followed->for_key(key)) {
        ready.emplace(self->request_under(policy, key, operation, permits));
      }
    }
    if (!ready) {
      std::optional<Decision> unconfirmed;
      try {
        ready.emplace(co_await followed_request(self, key, operation, permits, min_version,
                                                deadline, WhenUnread::no_policy));
      } catch (const UnconfirmedPolicy& e) {
        unconfirmed = self->answer_unconfirmed(e);
      }
      if (unconfirmed) co_return *unconfirmed;
    }
    DecideRequest& request = *ready;
    // Why taken now: the request's policy was confirmed with the server at this contact.
    const std::uint64_t contact = self->redis_->contact();
    try {
      Decision decision = co_await self->decide(request, nullptr);  // self keeps the enforcer
      decision.policy_version = request.policy->epoch().version;
      // Why not this answer: it came from a server reached after the contact broke (a retry
      // after a failover), where the policy it was asked under may be lost. Taking the failure
      // policy's answer instead can only under-admit; the next call reads the policy again.
      if (decision.source == Source::redis && contact != self->redis_->contact()) {
        decision = self->decide_on_failure(request, std::chrono::microseconds{0});
        decision.policy_version = request.policy->epoch().version;
      }
      co_return decision;
    } catch (const StalePolicy& stale) {
      min_version = stale.stored_version();
    }
    if (Clock::now() >= deadline) throw_still_stale(self->options_.name, min_version);
  }
}

Task<std::vector<redlimit::LimitState>> PolicyEnforcer::inspect_following(
    std::shared_ptr<PolicyEnforcer> self, std::string key) {
  const auto deadline = call_deadline(*self->redis_);
  std::int64_t min_version = 0;
  for (;;) {
    DecideRequest request = co_await followed_request(self, key, Operation::peek, 1, min_version,
                                                      deadline, WhenUnread::unavailable);
    try {
      co_return co_await self->inspect_under(std::move(request));
    } catch (const StalePolicy& stale) {
      min_version = stale.stored_version();
    }
    if (Clock::now() >= deadline) throw_still_stale(self->options_.name, min_version);
  }
}

Task<void> PolicyEnforcer::adjust_following(std::shared_ptr<PolicyEnforcer> self, std::string key,
                                            Adjustment adjustment, std::int64_t amount) {
  const auto deadline = call_deadline(*self->redis_);
  const std::int64_t permits = adjustment == Adjustment::block ? 1 : amount;
  std::int64_t min_version = 0;
  for (;;) {
    DecideRequest request = co_await followed_request(
        self, key, Operation::acquire, permits, min_version, deadline, WhenUnread::unavailable);
    try {
      co_await self->adjust_under(std::move(request), adjustment, amount);
      co_return;
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
  const auto started = Clock::now();
  auto deadline = call_deadline(*self->redis_);
  std::int64_t min_version = 0;
  for (;;) {
    std::optional<DecideRequest> in_force;
    std::optional<Decision> unconfirmed;
    try {
      in_force.emplace(co_await followed_request(self, key, Operation::acquire, permits,
                                                 min_version, deadline, WhenUnread::no_policy));
    } catch (const UnconfirmedPolicy& e) {
      unconfirmed = self->answer_unconfirmed(e);
    }
    if (unconfirmed) {
      unconfirmed->waited =
          std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started);
      co_return *unconfirmed;
    }
    DecideRequest& request = *in_force;
    const std::int64_t version = request.policy->epoch().version;
    const bool reservable = request.policy->limits().size() == 1 &&
                            can_reserve(request.policy->limits().front().limit.algorithm);
    bool again = false;
    bool replaced = false;  // the stored policy changed while it waited: reserve again at once
    try {
      Decision decision;
      if (reservable) {
        OwnedAcquireOptions rest = options;
        const auto waited =
            std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started);
        rest.max_wait = options.max_wait - std::min(options.max_wait, waited);
        std::optional<Decision> reserved =
            co_await self->acquire_by_reserving(std::move(request), key, rest);
        replaced = !reserved;
        again = replaced;
        if (reserved) {
          decision = *reserved;
          decision.waited =
              std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started);
        }
      } else {
        // Why not acquire_by_retrying(): each attempt asks under the policy in force then.
        decision = co_await self->decide(request, nullptr);
        decision.waited =
            std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started);
        again = !decision.allowed && decision.retry_after <= options.max_wait - decision.waited;
      }
      decision.policy_version = version;
      if (!again) co_return decision;
      if (!replaced) {
        const GaugeScope waiting(self->waiters_gauge(), options.slept);
        co_await sleep_for(self->loop_, decision.retry_after, options.stop);
      }
    } catch (const StalePolicy& stale) {
      min_version = stale.stored_version();
    }
    if (again) {
      min_version = 0;
      deadline = call_deadline(*self->redis_);
      continue;
    }
    // A cancelled wait whose give-back was refused as stale ends cancelled, not asked again.
    if (options.stop.stop_requested()) throw Cancelled("acquire cancelled while waiting");
    if (Clock::now() >= deadline) throw_still_stale(self->options_.name, min_version);
  }
}

}  // namespace redlimit::detail
