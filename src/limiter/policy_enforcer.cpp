#include "limiter/policy_enforcer.hpp"

#include <spdlog/spdlog.h>

#include "algorithms/reservations.hpp"
#include "limiter/fallback_policy.hpp"
#include "limiter/stale_policy.hpp"
#include "limiter/unavailability.hpp"
#include "policy/key_format.hpp"
#include "policy/validation.hpp"
#include "redis/reply_convert.hpp"
#include "redlimit/errors.hpp"
#include "runtime/failed_task.hpp"

namespace redlimit::detail {
namespace {

using Clock = std::chrono::steady_clock;

LimiterOptions validated(LimiterOptions options) {
  check_name("LimiterOptions::name", options.name);
  check_prefix("LimiterOptions::prefix", options.prefix);
  check_failure_policy("LimiterOptions::on_failure", options.on_failure);
  if (options.policy_refresh.count() < 1) {
    throw InvalidArgument("LimiterOptions::policy_refresh must be at least 1 ms");
  }
  return options;
}

/// Whether a denial bound by limit `binding` of `policy` may be remembered until its
/// retry_after (see DenyCache).
// Why this is exact, whatever the order of the limits: a denied request writes nothing, so
// answering it locally leaves Redis as the round trip would. A request passes only when every
// limit passes, and the script binds a denial to the limit with the longest retry_after; until
// then that limit's key only gets more used (time passing is what retry_after counts), so it
// alone denies the request, and the other limits can only deny more. Capacity comes back only
// through a reset or a refund (this process's are handled by the generation; another
// process's are seen when the remembered denial ends: until then the cache may under-admit,
// never over-admit) or a cancelled acquire() reservation. Only a
// bucket algorithm's key at index 0 can hold reservations (it is the key of a single-limit
// policy, here or in another limiter of the same name): a denial bound by it is not remembered.
bool cacheable(const CompiledPolicy& policy, std::size_t binding) {
  return binding != 0 || !can_reserve(policy.limits().front().limit.algorithm);
}

/// The counters of the limiter `options` describes: in LimiterOptions::metrics, else in its
/// client's (`redis`), else none.
LimiterMetrics* metrics_for(const LimiterOptions& options, const CommandDispatcher* redis) {
  Metrics* metrics = options.metrics ? options.metrics.get()
                                     : (redis != nullptr ? redis->metrics().get() : nullptr);
  return metrics != nullptr ? &metrics->limiter(options.name) : nullptr;
}

/// Whether any denial under `policy` may be remembered: not under a single bucket limit.
bool may_cache(const CompiledPolicy& policy) {
  return policy.limits().size() > 1 || cacheable(policy, 0);
}

}  // namespace

PolicyEnforcer::PolicyEnforcer(uv_loop_t* loop, std::shared_ptr<const CommandDispatcher> redis,
                               std::unique_ptr<Backend> backend, Policy policy,
                               LimiterOptions options, std::shared_ptr<spdlog::logger> logger)
    : loop_(loop),
      redis_(std::move(redis)),
      options_(validated(std::move(options))),
      escaped_name_(escape_key_part(options_.name)),
      policy_(CompiledPolicy::compile(policy)),
      backend_(std::move(backend)),
      logger_(std::move(logger)),
      observer_(metrics_for(options_, redis_.get()), options_, logger_) {
  if (redis_ != nullptr) turn_.bind_to(redis_->loop_thread());
  if (redis_ != nullptr && options_.on_failure.kind == FailurePolicy::local_fallback) {
    fallback_policy_ =
        CompiledPolicy::compile(fallback_policy(policy, options_.on_failure.local_share));
    fallback_ = std::make_unique<LocalBackend>();
  }
  if (redis_ != nullptr) per_client_name_ = escaped_name_ + "%@" + redis_->options().id;
}

PolicyEnforcer::PolicyEnforcer(uv_loop_t* loop, std::shared_ptr<const CommandDispatcher> redis,
                               std::unique_ptr<Backend> backend,
                               std::shared_ptr<PolicyFollower> follower, LimiterOptions options,
                               std::shared_ptr<spdlog::logger> logger)
    : loop_(loop),
      redis_(std::move(redis)),
      options_(validated(std::move(options))),
      escaped_name_(escape_key_part(options_.name)),
      backend_(std::move(backend)),
      per_client_name_(escaped_name_ + "%@" + redis_->options().id),
      follower_(std::move(follower)),
      logger_(std::move(logger)),
      observer_(metrics_for(options_, redis_.get()), options_, logger_) {
  if (redis_ != nullptr) turn_.bind_to(redis_->loop_thread());
  if (options_.on_failure.kind == FailurePolicy::local_fallback) {
    fallback_ = std::make_unique<LocalBackend>();
  }
  // Why: a waiter reserved under a version that a change replaced reserves again under the new
  // one (acquire_by_reserving); waking them makes it happen at the change, not at their slot.
  change_listener_ = follower_->listen([this] { waiters_.wake_all(); });
}

PolicyEnforcer::~PolicyEnforcer() {
  if (follower_) follower_->forget(change_listener_);
}

void PolicyEnforcer::publish_counts() {
  counts_published_ = true;
  StatsPublisher* publisher = redis_ != nullptr ? redis_->stats_publisher() : nullptr;
  if (publisher == nullptr || observer_.metrics() == nullptr) return;
  publisher->add(options_.prefix, options_.name,
                 options_.metrics ? options_.metrics : redis_->metrics(), *observer_.metrics());
}

RedisBackend* PolicyEnforcer::redis_backend() const noexcept {
  return dynamic_cast<RedisBackend*>(backend_.get());
}

LocalBackend* PolicyEnforcer::local_backend() const noexcept {
  return dynamic_cast<LocalBackend*>(backend_.get());
}

void PolicyEnforcer::observe(Decision decision, std::string_view key, std::int64_t permits) {
  if (!observer_.active()) return;
  observer_.decided(decision, key, permits, std::nullopt, false);
  if (!counts_published_) publish_counts();
}

const Policy& PolicyEnforcer::policy() const noexcept {
  static const Policy none;
  return policy_ ? policy_->policy() : none;
}

std::shared_ptr<const CompiledPolicy> PolicyEnforcer::fallback_policy_for(
    const std::shared_ptr<const CompiledPolicy>& source) const {
  if (!follower_) return fallback_policy_;
  if (source != fallback_source_) {
    followed_fallback_ = CompiledPolicy::compile(
        fallback_policy(source->policy(), options_.on_failure.local_share), source->epoch());
    fallback_source_ = source;
  }
  return followed_fallback_;
}

DecideRequest PolicyEnforcer::request(std::string_view key, Operation operation,
                                      std::int64_t permits) const {
  return request_under(policy_, key, operation, permits);
}

DecideRequest PolicyEnforcer::request_under(std::shared_ptr<const CompiledPolicy> policy,
                                            std::string_view key, Operation operation,
                                            std::int64_t permits) const {
  check_key(key);
  policy->check_permits(permits);
  // Why only with Redis: in process, every client of the limiter is this process.
  const bool per_client = policy->policy().scope == Scope::per_client && redis_ != nullptr;
  KeyBase base = key_base(options_.prefix, per_client ? per_client_name_ : escaped_name_, key);
  return DecideRequest(std::move(policy), std::move(base), operation, permits);
}

DecideRequest PolicyEnforcer::fallback_request(const DecideRequest& request) const {
  DecideRequest local = request;
  local.policy = fallback_policy_for(request.policy);
  return local;
}

DecideRequest PolicyEnforcer::give_back_request(const DecideRequest& reserved,
                                                const Backend* backend,
                                                std::string_view key) const {
  // Why the key's own policy: a follower's policy_ is the name's, and an override's key given
  // back under it would carry the name's version, refusing the override's requests as stale.
  std::shared_ptr<const CompiledPolicy> in_force = policy_;
  if (follower_) {
    const auto& followed = follower_->last();
    in_force = followed ? followed->for_key(key) : nullptr;
  }
  if (in_force && backend != backend_.get()) in_force = fallback_policy_for(in_force);
  DecideRequest out = reserved;
  if (in_force && in_force->limits().size() == 1 &&
      in_force->limits().front().key_suffix == reserved.policy->limits().front().key_suffix) {
    out.policy = in_force;
  }
  return out;
}

bool PolicyEnforcer::fits_fallback(const DecideRequest& request) const {
  for (const auto& limit : fallback_policy_for(request.policy)->limits()) {
    if (request.permits > limit.capacity) return false;
  }
  return true;
}

Decision PolicyEnforcer::decide_on_failure(const DecideRequest& request,
                                           std::chrono::microseconds retry_in) {
  const CompiledLimit& first = request.policy->limits().front();
  const FailureAnswer answer = failure_answer(options_.on_failure, fallback_ != nullptr,
                                              fallback_ && fits_fallback(request), retry_in);
  Decision decision;
  decision.limit = first.capacity;
  switch (answer.action) {
    case FailureAnswer::Action::allow:
      decision.allowed = true;
      decision.remaining = first.capacity - request.permits;  // unknown: as if fresh
      break;
    case FailureAnswer::Action::ask_fallback:
      decision = fallback_->decide_now(fallback_request(request));
      break;
    case FailureAnswer::Action::deny:
      decision.allowed = false;
      decision.retry_after = answer.retry_after;
      break;
  }
  decision.source = answer.source;
  return decision;
}

Task<Decision> PolicyEnforcer::decide(DecideRequest request,
                                      [[maybe_unused]] std::shared_ptr<PolicyEnforcer> keep_alive) {
  co_await turn_.yield_if_due();
  const std::uint64_t generation = generation_;
  const bool cache = options_.deny_cache && redis_ != nullptr &&
                     request.operation == Operation::acquire && may_cache(*request.policy);
  // Why only when needed: a clock reading is a noticeable part of a decision's client CPU,
  // and without the deny cache none is needed.
  Clock::time_point sent{};
  if (cache) sent = Clock::now();
  if (cache) {
    if (auto cached = deny_cache_.lookup(request.key_base.view(), request.permits, sent)) {
      co_return *cached;
    }
  }
  std::exception_ptr error;
  try {
    Decision decision = co_await backend_->decide(request);
    // Why the generation: a reset() or set_policy() while this was in flight may have given
    // capacity back; a denial from before it is not remembered.
    if (cache && !decision.allowed && generation == generation_ &&
        cacheable(*request.policy, decision.binding)) {
      deny_cache_.remember(request.key_base.view(), request.permits, decision, sent);
    }
    co_return decision;
  } catch (const StalePolicy&) {
    throw;  // a follower reads its policy again and asks once more
  } catch (...) {
    error = std::current_exception();
  }
  co_return decide_on_failure(request, retry_in_after(error));
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
  observer_.decided(*decision, key, permits, max_wait, slept);
  if (!counts_published_) publish_counts();
  return *decision;
}

Task<Decision> PolicyEnforcer::observed_try_acquire(std::shared_ptr<PolicyEnforcer> self,
                                                    std::string key, std::int64_t permits) {
  ObservedCall call(self->observer_.metrics());
  const std::string kept = self->observer_.wants_key() ? key : std::string();
  std::exception_ptr error;
  std::optional<Decision> decision;
  try {
    decision = co_await self->try_acquire_unobserved(std::move(key), permits);
  } catch (...) {
    error = std::current_exception();
  }
  co_return self->finish(call, error, decision, kept, permits, std::nullopt, false);
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
      if (options.stop.stop_requested()) throw Cancelled("acquire cancelled before it started");
      decision = co_await self->try_acquire_unobserved(std::move(key), permits);
    } else {
      decision = co_await acquire_unobserved(self, std::move(key), permits, std::move(options));
    }
  } catch (...) {
    error = std::current_exception();
  }
  co_return self->finish(call, error, decision, kept, permits, max_wait, slept);
}

Task<Decision> PolicyEnforcer::try_acquire(std::string key, std::int64_t permits) {
  if (!observer_.active()) return try_acquire_unobserved(std::move(key), permits);
  return observed_try_acquire(shared_from_this(), std::move(key), permits);
}

Task<Decision> PolicyEnforcer::acquire(std::shared_ptr<PolicyEnforcer> self, std::string key,
                                       std::int64_t permits, OwnedAcquireOptions options) {
  if (!self->observer_.active()) {
    return acquire_unobserved(std::move(self), std::move(key), permits, std::move(options));
  }
  return observed_acquire(std::move(self), std::move(key), permits, std::move(options));
}

// Why not coroutines: a coroutine layer per call costs a frame and a resumption; an invalid
// argument still reaches the caller at its co_await, as from a coroutine.
Task<Decision> PolicyEnforcer::try_acquire_unobserved(std::string key, std::int64_t permits) {
  if (follower_) {
    return decide_following(shared_from_this(), std::move(key), Operation::acquire, permits);
  }
  try {
    return decide(request(key, Operation::acquire, permits), shared_from_this());
  } catch (...) {
    return failed_task<Decision>(std::current_exception());
  }
}

Task<Decision> PolicyEnforcer::peek(std::string key) {
  if (follower_) return decide_following(shared_from_this(), std::move(key), Operation::peek, 1);
  try {
    return decide(request(key, Operation::peek, 1), shared_from_this());
  } catch (...) {
    return failed_task<Decision>(std::current_exception());
  }
}

Task<void> PolicyEnforcer::reset(std::shared_ptr<PolicyEnforcer> self, std::string key) {
  // Why not one conditional expression: g++ 12 mishandles a co_await inside one.
  std::optional<DecideRequest> followed;
  if (self->follower_)
    followed.emplace(co_await followed_request(self, key, Operation::peek, 1, 0,
                                               self->redis_->command_deadline(),
                                               WhenUnread::unavailable));
  DecideRequest validated_request =
      followed ? std::move(*followed) : self->request(key, Operation::peek, 1);
  ++self->generation_;
  self->deny_cache_.forget(validated_request.key_base.view());
  if (self->fallback_) {
    co_await self->fallback_->reset(self->fallback_policy_for(validated_request.policy),
                                    validated_request.key_base.str());
  }
  co_await self->backend_->reset(std::move(validated_request.policy),
                                 validated_request.key_base.str());
}

Task<std::vector<redlimit::LimitState>> PolicyEnforcer::inspect(
    std::shared_ptr<PolicyEnforcer> self, std::string key) {
  if (self->follower_) co_return co_await inspect_following(self, std::move(key));
  co_return co_await self->inspect_under(self->request(key, Operation::peek, 1));
}

Task<std::vector<redlimit::LimitState>> PolicyEnforcer::inspect_under(DecideRequest whole) {
  const auto& limits = whole.policy->limits();
  std::vector<redlimit::LimitState> states(limits.size());
  // Why one after another, not in a TaskGroup: a caller may abandon the call (destroy its task)
  // while it waits, and a group's members would outlive this frame and the states they fill.
  for (std::size_t i = 0; i < limits.size(); ++i) {
    redlimit::LimitState& state = states[i];
    state.limit = limits[i].limit;
    state.redis_key = whole.key_base.str() + limits[i].key_suffix;
    const DecideRequest one(whole.policy->only(i), whole.key_base, Operation::peek, 1);
    state.state = co_await backend_->decide(one);
    state.state.policy_version = whole.policy->epoch().version;
    state.ttl = co_await backend_->ttl(state.redis_key);
  }
  co_return states;
}

void PolicyEnforcer::set_policy(Policy policy, Carry carry) {
  if (follower_) {
    throw InvalidArgument(
        "set_policy() on a limiter that follows a PolicyStore: change the "
        "stored policy instead (PolicyStore::set)");
  }
  if (policy.scope != policy_->policy().scope && carry != Carry::reset) {
    throw InvalidArgument(
        "set_policy(): the policy changes the scope: every key starts afresh under another "
        "scope (its keys are other keys), so that change is made only with Carry::reset");
  }
  // Why the system clock: the change takes effect now; Redis converts a key at
  // min(since, its own TIME), so a client clock ahead of Redis's only means "at once".
  const PolicyEpoch epoch{.version = 0, .since_us = LocalBackend::system_clock(), .carry = carry};
  auto compiled = CompiledPolicy::compile(policy, epoch);
  if (fallback_) {
    fallback_policy_ =
        CompiledPolicy::compile(fallback_policy(policy, options_.on_failure.local_share), epoch);
  }
  policy_ = std::move(compiled);
  ++generation_;
  deny_cache_.clear();
  waiters_.wake_all();  // they reserve again under this policy (acquire_by_reserving)
}

bool PolicyEnforcer::superseded(const CompiledPolicy& reserved_under, std::string_view key) const {
  if (!follower_) return policy_.get() != &reserved_under;
  const auto& followed = follower_->last();
  const CompiledPolicy* in_force = followed ? followed->for_key(key).get() : nullptr;
  return in_force == nullptr || in_force->epoch().version != reserved_under.epoch().version;
}

}  // namespace redlimit::detail
