#include "limiter/policy_enforcer.hpp"

#include <algorithm>

#include "limiter/fallback_policy.hpp"
#include "limiter/unavailability.hpp"
#include "policy/key_format.hpp"
#include "policy/validation.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

LimiterOptions validated(LimiterOptions options) {
  check_name("LimiterOptions::name", options.name);
  check_prefix("LimiterOptions::prefix", options.prefix);
  check_failure_policy("LimiterOptions::on_failure", options.on_failure);
  if (options.policy_refresh.count() < 1) {
    throw InvalidArgument("LimiterOptions::policy_refresh must be at least 1 ms");
  }
  return options;
}

/// The counters of the limiter `options` describes: in LimiterOptions::metrics, else in its
/// client's (`redis`), else none.
LimiterMetrics* metrics_for(const LimiterOptions& options, const CommandDispatcher* redis) {
  Metrics* metrics = options.metrics ? options.metrics.get()
                                     : (redis != nullptr ? redis->metrics().get() : nullptr);
  return metrics != nullptr ? &metrics->limiter(options.name) : nullptr;
}

}  // namespace

PolicyEnforcer::PolicyEnforcer(uv_loop_t* loop, std::shared_ptr<const CommandDispatcher> redis,
                               std::shared_ptr<StatsPublisher> stats,
                               std::unique_ptr<Backend> backend,
                               std::unique_ptr<PolicySource> source, LimiterOptions options,
                               std::shared_ptr<spdlog::logger> logger)
    : loop_(loop),
      redis_(std::move(redis)),
      stats_(std::move(stats)),
      options_(validated(std::move(options))),
      escaped_name_(escape_key_part(options_.name)),
      source_(std::move(source)),
      backend_(std::move(backend)),
      logger_(std::move(logger)),
      observer_(metrics_for(options_, redis_.get()), options_, logger_) {
  if (redis_ != nullptr) {
    turn_.bind_to(redis_->loop_thread());
    per_client_name_ = escaped_name_ + "%@" + redis_->options().id;
    // Why only with Redis: an in-process limiter cannot fail.
    if (options_.on_failure.kind == FailurePolicy::local_fallback) {
      fallback_ = std::make_unique<LocalBackend>();
    }
  }
  // The policy in force changed, or may have: denials remembered under the previous one may not
  // hold.
  source_->on_change([this] {
    ++generation_;
    deny_cache_.clear();
    // Why: a waiter reserved under a policy that a change replaced reserves again under the new
    // one (reserve_and_wait()); waking them makes it happen at the change, not at their slot.
    waiters_.wake_all();
  });
}

void PolicyEnforcer::publish_counts() {
  counts_published_ = true;
  if (stats_ != nullptr) observer_.count_for_fleet(stats_->add(options_.prefix, options_.name));
}

void PolicyEnforcer::observe(Decision decision, std::string_view key, std::int64_t permits) {
  if (!observer_.active()) return;
  if (!counts_published_) publish_counts();
  observer_.decided(decision, key, permits, std::nullopt, false);
}

std::shared_ptr<const CompiledPolicy> PolicyEnforcer::fallback_policy_for(
    const std::shared_ptr<const CompiledPolicy>& source) const {
  if (source != fallback_source_) {
    fallback_policy_ = CompiledPolicy::compile(
        fallback_policy(source->policy(), options_.on_failure.local_share), source->epoch());
    fallback_source_ = source;
  }
  return fallback_policy_;
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
  // Why the key's own policy: a follower's named policy is the name's, and an override's key
  // given back under it would carry the name's version, refusing the override's requests as
  // stale.
  std::shared_ptr<const CompiledPolicy> in_force = source_->last(key);
  if (in_force && backend != backend_.get()) in_force = fallback_policy_for(in_force);
  DecideRequest out = reserved;
  if (in_force && in_force->limits().size() == 1 &&
      in_force->limits().front().key_suffix == reserved.policy->limits().front().key_suffix) {
    out.policy = in_force;
  }
  return out;
}

std::optional<DecideRequest> PolicyEnforcer::on_fallback(const DecideRequest& request) const {
  // Why no look at the failure policy: only local_fallback has a fallback.
  if (!fallback_) return std::nullopt;
  DecideRequest local = fallback_request(request);
  if (!std::ranges::all_of(local.policy->limits(),
                           [&](const auto& limit) { return request.permits <= limit.capacity; })) {
    return std::nullopt;
  }
  return local;
}

Decision PolicyEnforcer::decide_on_failure(const DecideRequest& request,
                                           std::chrono::microseconds retry_in) {
  const std::optional<DecideRequest> local = on_fallback(request);
  const FailureAnswer answer =
      failure_answer(options_.on_failure, fallback_ != nullptr, local.has_value(), retry_in);
  Decision decision;
  if (answer.action == FailureAnswer::Action::ask_fallback) {
    decision = fallback_->decide_now(*local);
  } else {
    const CompiledLimit& first = request.policy->limits().front();
    decision.allowed = answer.action == FailureAnswer::Action::allow;
    decision.limit = first.capacity;
    // Allowed: the remaining is unknown, as if the limit were fresh (and retry_after is 0).
    if (decision.allowed) decision.remaining = first.capacity - request.permits;
    decision.retry_after = answer.retry_after;
  }
  decision.source = answer.source;
  return decision;
}

void PolicyEnforcer::count_late() noexcept {
  if (LimiterMetrics* metrics = observer_.metrics()) metrics->late_admissions.add();
}

bool PolicyEnforcer::superseded(const CompiledPolicy& reserved_under, std::string_view key) const {
  const auto in_force = source_->last(key);
  if (!source_->stored()) return in_force.get() != &reserved_under;
  // Why by epoch: a follower compiles each read of the store again. Why its time too: the
  // store's versions start again after a restart that lost them.
  return in_force == nullptr || in_force->epoch() != reserved_under.epoch();
}

}  // namespace redlimit::detail
