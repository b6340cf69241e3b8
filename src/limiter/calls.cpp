// The calls of a Limiter, for either policy source: resolve the policy in force, ask, and ask
// again when a script refuses the request as stale. try_acquire() and peek() are one coroutine
// each: observation, the deny cache and the failure policy are steps of it, not layers.

#include "limiter/policy_enforcer.hpp"
#include "limiter/unavailability.hpp"
#include "policy/unconfirmed_policy.hpp"
#include "policy/validation.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

using Clock = std::chrono::steady_clock;

/// Whether a denial bound by limit `binding` of `policy` may be remembered until its
/// retry_after (see DenyCache).
// Why this is exact, whatever the order of the limits: a denied request writes nothing, and the
// script binds a denial to the limit with the longest retry_after; until then that limit's key
// only gets more used, so it alone denies the request, and the other limits can only deny more.
// Capacity comes back only through a reset or a refund (this process's: see the generation;
// another's are seen when the denial ends: the cache may under-admit, never over-admit) or a
// cancelled reservation, which only a bucket limit's key at index 0 can hold (the key of a
// single-limit policy, here or in another limiter of the same name): such denials are not kept.
bool cacheable(const CompiledPolicy& policy, std::size_t binding) {
  return binding != 0 || !can_reserve(policy.limits().front().limit.algorithm);
}

}  // namespace

bool PolicyEnforcer::may_cache(const DecideRequest& request) const noexcept {
  const CompiledPolicy& policy = *request.policy;
  return options_.deny_cache && redis_ != nullptr && request.operation == Operation::acquire &&
         (policy.limits().size() > 1 || cacheable(policy, 0));
}

Clock::time_point PolicyEnforcer::stale_deadline() const noexcept {
  // Why unbounded for a fixed policy: only a stored one is ever stale. And a decision under a
  // fixed policy reads no clock for it (a clock reading is a noticeable part of its CPU).
  return source_->stored() ? redis_->command_deadline() : Clock::time_point::max();
}

Decision PolicyEnforcer::answer_unconfirmed(const DecideRequest& request) {
  // Why no wait before Redis is asked again: the next call reads the policy again at once.
  Decision decision = decide_on_failure(request, std::chrono::microseconds{0});
  decision.policy_version = request.policy->epoch().version;
  return decision;
}

Task<PolicyEnforcer::InForce> PolicyEnforcer::request_in_force(std::shared_ptr<PolicyEnforcer> self,
                                                               std::string key, Operation operation,
                                                               std::int64_t permits,
                                                               std::int64_t min_version,
                                                               Clock::time_point deadline,
                                                               WhenUnread when_unread) {
  check_key(key);
  std::shared_ptr<const CompiledPolicy> policy =
      min_version == 0 ? self->source_->ready(key) : nullptr;
  std::exception_ptr unconfirmed;
  if (!policy) {
    try {
      policy = co_await self->source_->resolve(key, min_version, deadline, when_unread);
    } catch (const UnconfirmedPolicy& e) {
      if (when_unread == WhenUnread::unavailable) throw;
      policy = e.policy();
      unconfirmed = std::current_exception();
    }
  }
  co_return InForce{self->request_under(std::move(policy), key, operation, permits), unconfirmed};
}

Task<Decision> PolicyEnforcer::decide(std::shared_ptr<PolicyEnforcer> self, std::string key,
                                      Operation operation, std::int64_t permits, bool observed) {
  PolicyEnforcer& enforcer = *self;
  std::optional<ObservedCall> call;
  std::string kept;
  if (observed) {
    call.emplace(enforcer.observer_.metrics());
    if (enforcer.observer_.wants_key()) kept = key;
  }
  std::optional<Decision> decision;
  std::exception_ptr error;
  try {
    co_await enforcer.turn_.yield_if_due();
    StaleRetry retry(enforcer.stale_deadline());
    while (!decision) {
      // Why the synchronous way first: in the common case the policy is known, and resolving it
      // needs no coroutine of its own.
      std::optional<InForce> in_force;
      if (auto ready = retry.min_version() == 0 ? enforcer.source_->ready(key) : nullptr) {
        in_force.emplace(
            InForce{enforcer.request_under(std::move(ready), key, operation, permits), nullptr});
      } else {
        in_force.emplace(co_await request_in_force(self, key, operation, permits,
                                                   retry.min_version(), retry.deadline()));
      }
      if (in_force->unconfirmed) {
        decision = enforcer.answer_unconfirmed(in_force->request);
        break;
      }
      const DecideRequest& request = in_force->request;
      const bool stored = enforcer.source_->stored();
      // Why taken now: a stored policy was confirmed with the server at this contact.
      const std::uint64_t contact = stored ? enforcer.redis_->contact() : 0;
      const bool cache = enforcer.may_cache(request);
      // Why only with the deny cache: a clock reading is a noticeable part of a decision's CPU.
      Clock::time_point sent{};
      if (cache) {
        sent = Clock::now();
        if (auto cached =
                enforcer.deny_cache_.lookup(request.key_base.view(), request.permits, sent)) {
          decision = *cached;
          break;
        }
      }
      const std::uint64_t generation = enforcer.generation_;
      std::exception_ptr failure;
      try {
        // Why run() itself: Backend::decide() would cost a frame more per decision.
        BackendOp op = DecideOp{request};
        co_await enforcer.backend_->run({&op, 1});
        const Decision& decided = std::get<DecideOp>(op).result;
        // Why the generation: a reset, an adjustment or a policy change while this was in
        // flight may have given capacity back; a denial from before it is not remembered.
        if (cache && !decided.allowed && generation == enforcer.generation_ &&
            cacheable(*request.policy, decided.binding)) {
          enforcer.deny_cache_.remember(request.key_base.view(), request.permits, decided, sent);
        }
        decision = decided;
      } catch (...) {
        failure = std::current_exception();
      }
      // Why the ask-again stage's rule inline, not asking_again(): a frame more per decision
      // (tests/redis/call_frames_test.cpp).
      if (const std::optional<StalePolicy> stale = stale_refusal(failure)) {
        retry.refused(*stale, enforcer.options_.name);
        continue;
      }
      if (failure) decision = enforcer.decide_on_failure(request, retry_in_after(failure));
      if (!stored) break;
      // Why not an answer from a server reached after the contact broke (a retry after a
      // failover): the stored policy it was asked under may be lost there. Taking the failure
      // policy's answer instead can only under-admit; the next call reads the policy again.
      if (decision->source == Source::redis && contact != enforcer.redis_->contact()) {
        decision = enforcer.decide_on_failure(request, std::chrono::microseconds{0});
      }
      decision->policy_version = request.policy->epoch().version;
    }
  } catch (...) {
    error = std::current_exception();
  }
  if (!observed) {
    if (error) std::rethrow_exception(error);
    co_return *decision;
  }
  co_return enforcer.finish(*call, error, decision, kept, permits, std::nullopt, false);
}

Decision PolicyEnforcer::finish(ObservedCall& call, const std::exception_ptr& error,
                                std::optional<Decision>& decision, std::string_view key,
                                std::int64_t permits,
                                std::optional<std::chrono::microseconds> max_wait, bool slept) {
  call.end();
  if (error) {
    observer_.failed(error, key, permits);
    std::rethrow_exception(error);
  }
  if (!counts_published_) publish_counts();
  observer_.decided(*decision, key, permits, max_wait, slept);
  return *decision;
}

Task<Decision> PolicyEnforcer::acquire(std::shared_ptr<PolicyEnforcer> self, std::string key,
                                       std::int64_t permits, OwnedAcquireOptions options) {
  // Why not a coroutine: a call nobody observes costs no frame of its own.
  if (!self->observer_.active()) {
    return wait_and_acquire(std::move(self), std::move(key), permits, std::move(options));
  }
  return observed_acquire(std::move(self), std::move(key), permits, std::move(options));
}

Task<Decision> PolicyEnforcer::observed_acquire(std::shared_ptr<PolicyEnforcer> self,
                                                std::string key, std::int64_t permits,
                                                OwnedAcquireOptions options) {
  ObservedCall call(self->observer_.metrics());
  const std::string kept = self->observer_.wants_key() ? key : std::string();
  const std::chrono::microseconds max_wait = options.max_wait;
  // Why a local: this frame outlives the call it observes.
  bool slept = false;
  options.slept = &slept;
  std::exception_ptr error;
  std::optional<Decision> decision;
  try {
    if (self->options_.shadow) {
      // Why one decision in shadow mode: nothing is enforced, so nobody waits. The arguments
      // are checked as an enforcing acquire() checks them.
      check_max_wait(options.max_wait);
      check_max_lateness(options.max_lateness);
      if (options.stop.stop_requested()) throw Cancelled("acquire cancelled before it started");
      decision = co_await decide(self, std::move(key), Operation::acquire, permits, false);
    } else {
      decision = co_await wait_and_acquire(self, std::move(key), permits, std::move(options));
    }
  } catch (...) {
    error = std::current_exception();
  }
  co_return self->finish(call, error, decision, kept, permits, max_wait, slept);
}

Task<void> PolicyEnforcer::reset(std::shared_ptr<PolicyEnforcer> self, std::string key) {
  co_await self->turn_.yield_if_due();  // in order behind the calls waiting for the next turn
  InForce in_force = co_await request_in_force(self, key, Operation::peek, 1, 0,
                                               self->stale_deadline(), WhenUnread::unavailable);
  DecideRequest& request = in_force.request;
  self->forget_denial(request.key_base.view());
  if (self->fallback_) {
    co_await self->fallback_->reset(self->fallback_policy_for(request.policy),
                                    request.key_base.str());
  }
  co_await self->backend_->reset(std::move(request.policy), request.key_base.str());
}

Task<std::vector<redlimit::LimitState>> PolicyEnforcer::inspect(
    std::shared_ptr<PolicyEnforcer> self, std::string key) {
  using States = std::vector<redlimit::LimitState>;
  return in_force_asking_again<States>(
      std::move(self), std::move(key), Operation::peek, 1,
      [](PolicyEnforcer& enforcer, DecideRequest whole) -> Task<States> {
        const auto& limits = whole.policy->limits();
        States states(limits.size());
        // Why one after another, not in a TaskGroup: a caller may abandon the call (destroy its
        // task) while it waits, and a group's members would outlive this frame and the states.
        for (std::size_t i = 0; i < limits.size(); ++i) {
          redlimit::LimitState& state = states[i];
          state.limit = limits[i].limit;
          state.redis_key = whole.key_base.str() + limits[i].key_suffix;
          const DecideRequest one(whole.policy->only(i), whole.key_base, Operation::peek, 1);
          state.state = co_await enforcer.backend_->decide(one);
          state.state.policy_version = whole.policy->epoch().version;
          state.ttl = co_await enforcer.backend_->ttl(state.redis_key);
        }
        co_return states;
      });
}

}  // namespace redlimit::detail
