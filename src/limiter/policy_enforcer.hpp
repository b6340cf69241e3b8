#pragma once

#include <spdlog/spdlog.h>
#include <uv.h>

#include <memory>
#include <string>
#include <string_view>

#include "fleet/stats_publisher.hpp"
#include "limiter/backend.hpp"
#include "limiter/call_observer.hpp"
#include "limiter/deny_cache.hpp"
#include "limiter/local_backend.hpp"
#include "limiter/owned_acquire_options.hpp"
#include "limiter/waiters.hpp"
#include "policy/compiled_policy.hpp"
#include "policy/policy_follower.hpp"
#include "policy/policy_source.hpp"
#include "policy/stale_policy.hpp"
#include "redis/command_dispatcher.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/runtime.hpp"
#include "runtime/loop_turn.hpp"

namespace redlimit::detail {

/// One attempt of acquire() or acquire_all(): the decision the caller gets, one to wait out
/// (`wait_out`: a policy that cannot reserve), or none: reserve again at once.
struct Attempted {
  std::optional<ClaimsDecision> decision;
  bool wait_out = false;
};

/// The wait of acquire() and acquire_all(), begun at `started`: `attempt()` again at once when it
/// has no decision, and after the retry_after of a decision to wait out that fits in max_wait (a
/// waiter on `gauge` meanwhile). Returns the decision with its `waited` set.
template <class Attempt>
Task<ClaimsDecision> waiting_out(uv_loop_t* loop, Gauge* gauge, const OwnedAcquireOptions& options,
                                 std::chrono::steady_clock::time_point started, Attempt attempt) {
  for (;;) {
    Attempted attempted = co_await attempt();
    if (!attempted.decision) continue;
    Decision& decision = attempted.decision->decision;
    decision.waited = since(started);
    if (!attempted.wait_out || decision.allowed ||
        decision.retry_after > options.max_wait - decision.waited) {
      co_return std::move(*attempted.decision);
    }
    const GaugeScope waiting(gauge, options.slept);
    co_await sleep_for(loop, decision.retry_after, options.stop);
  }
}

/// Enforces a Limiter's policy: validation, keys, waiting, failure handling, the deny cache and
/// the backend. Shared: a spawned give-back of an abandoned reservation keeps it alive.
class PolicyEnforcer : public std::enable_shared_from_this<PolicyEnforcer> {
 public:
  /// `redis` is the client's dispatcher (the backend sends through it), or null in process,
  /// where the backend cannot fail. `stats` is the client's StatsPublisher (null: the counts
  /// stay here). `source` is fixed_policy() or stored_policies() (never in process).
  PolicyEnforcer(uv_loop_t* loop, std::shared_ptr<const CommandDispatcher> redis,
                 std::shared_ptr<StatsPublisher> stats, std::unique_ptr<Backend> backend,
                 std::unique_ptr<PolicySource> source, LimiterOptions options,
                 std::shared_ptr<spdlog::logger> logger);
  PolicyEnforcer(const PolicyEnforcer&) = delete;
  PolicyEnforcer& operator=(const PolicyEnforcer&) = delete;

  // Why every call keeps the enforcer alive: a Limiter that is destroyed or assigned to while
  // a call waits drops its reference, and the call's frames still use the enforcer.
  Task<Decision> try_acquire(std::string key, std::int64_t permits) {
    return decide(shared_from_this(), std::move(key), Operation::acquire, permits,
                  observer_.active());
  }
  /// In shadow mode (LimiterOptions::shadow), decides once, as try_acquire() does.
  static Task<Decision> acquire(std::shared_ptr<PolicyEnforcer> self, std::string key,
                                std::int64_t permits, OwnedAcquireOptions options);
  Task<Decision> peek(std::string key) {
    return decide(shared_from_this(), std::move(key), Operation::peek, 1, false);
  }
  /// Every limit's state for `key` (Limiter::inspect()).
  static Task<std::vector<redlimit::LimitState>> inspect(std::shared_ptr<PolicyEnforcer> self,
                                                         std::string key);
  static Task<void> reset(std::shared_ptr<PolicyEnforcer> self, std::string key);
  /// refund(), penalize() and block(): `amount` is the permits, or the block's duration in us.
  static Task<void> adjust(std::shared_ptr<PolicyEnforcer> self, std::string key,
                           Adjustment adjustment, std::int64_t amount);
  /// Replaces the limiter's own policy (PolicySource::replace()): InvalidArgument for a follower.
  void set_policy(Policy policy, Carry carry) { source_->replace(policy, carry); }
  /// The policy in effect, compiled; for a follower the name's policy read last (null before).
  std::shared_ptr<const CompiledPolicy> named_policy() const { return source_->named(); }
  const LimiterOptions& options() const noexcept { return options_; }
  uv_loop_t* loop() const noexcept { return loop_; }
  /// Throws UsageError when called off the client's loop thread (an in-process limiter cannot
  /// tell).
  void check_thread() const {
    if (redis_) redis_->check_thread();
  }

  /// A validated request under the policy in force for its key.
  struct InForce {
    DecideRequest request;
    /// With WhenUnread::no_policy, a follower's UnconfirmedPolicy: `request` is under the policy
    /// read last, and the failure policy answers it (answer_unconfirmed()).
    std::exception_ptr unconfirmed;
  };
  /// A validated request for `key` under the policy in force for it (PolicySource::resolve():
  /// of at least `min_version`, read by `deadline`, `when_unread` as it says).
  static Task<InForce> request_in_force(std::shared_ptr<PolicyEnforcer> self, std::string key,
                                        Operation operation, std::int64_t permits,
                                        std::int64_t min_version,
                                        std::chrono::steady_clock::time_point deadline,
                                        WhenUnread when_unread = WhenUnread::no_policy);
  /// What every call checks first (see LoopTurn), try_acquire_all() too.
  LoopTurn& turn() noexcept { return turn_; }
  /// The sleeping waiters of this limiter's reservations, per key (acquire_all()'s parts too).
  WaiterRegistry& waiters() noexcept { return waiters_; }
  /// Whether this limiter follows a PolicyStore.
  bool follows() const noexcept { return source_->stored(); }
  /// Where this limiter's decisions are made.
  Backend& backend() const noexcept { return *backend_; }
  /// Forgets the denial remembered for `key_base` (DenyCache), and keeps one in flight out of
  /// the cache: its key was given capacity back (a refund, a reset, a take given back).
  void forget_denial(std::string_view key_base) {
    ++generation_;
    deny_cache_.forget(key_base);
  }
  /// When a call that begins now stops asking again after StalePolicy (StaleRetry).
  std::chrono::steady_clock::time_point stale_deadline() const noexcept;
  /// What the failure policy answers for `request`; `retry_in`: when Redis will be tried again
  /// (the breaker's next probe), 0 when unknown.
  Decision decide_on_failure(const DecideRequest& request, std::chrono::microseconds retry_in);
  /// Counts permits admitted too late to use (AcquireOptions::max_lateness).
  void count_late() noexcept;
  /// The waiters gauge, or null when nothing is counted.
  Gauge* waiters_gauge() const noexcept {
    return observer_.metrics() != nullptr ? &observer_.metrics()->waiters : nullptr;
  }
  /// Where `request` is decided or reserved when Redis cannot answer: on the local fallback,
  /// under its scaled policy, when its share can ever grant it; none: the failure policy answers.
  std::optional<DecideRequest> on_fallback(const DecideRequest& request) const;
  /// The local fallback (local_fallback), else null.
  LocalBackend* fallback() const noexcept { return fallback_.get(); }
  /// How many times the client's connections broke (CommandDispatcher::contact()); 0 in process.
  std::uint64_t contact() const noexcept { return redis_ != nullptr ? redis_->contact() : 0; }
  /// A decision of try_acquire_all() on `key`, observed as this limiter's try_acquire() would be.
  void observe(Decision decision, std::string_view key, std::int64_t permits);

  /// A validated request for `key` under `policy`; throws InvalidArgument.
  DecideRequest request_under(std::shared_ptr<const CompiledPolicy> policy, std::string_view key,
                              Operation operation, std::int64_t permits) const;

  /// The request that gives back a reservation made with `reserved` on `backend` for `key`: under
  /// the key's policy in force now when its single limit is on the same Redis key (carried over
  /// to it, bug 4 of issue 14), else under the reservation's own.
  DecideRequest give_back_request(const DecideRequest& reserved, const Backend* backend,
                                  std::string_view key) const;
  /// Whether a reservation made under `reserved_under` for `key` waits under a policy no longer
  /// in force.
  bool superseded(const CompiledPolicy& reserved_under, std::string_view key) const;

 private:
  /// try_acquire() (`observed` when the observer is active) and peek(): one decision under the
  /// policy in force, from the deny cache, the backend or the failure policy.
  static Task<Decision> decide(std::shared_ptr<PolicyEnforcer> self, std::string key,
                               Operation operation, std::int64_t permits, bool observed);
  /// Names this limiter for asking_again(), whichever claim was refused.
  auto named() const noexcept {
    return [this](std::size_t) { return std::string_view(options_.name); };
  }
  /// acquire() with the observer active.
  static Task<Decision> observed_acquire(std::shared_ptr<PolicyEnforcer> self, std::string key,
                                         std::int64_t permits, OwnedAcquireOptions options);
  /// acquire() as it waits: reserving for a reservable policy, else deciding again at each
  /// retry_after, each time under the policy in force then.
  static Task<Decision> wait_and_acquire(std::shared_ptr<PolicyEnforcer> self, std::string key,
                                         std::int64_t permits, OwnedAcquireOptions options);
  /// One attempt of wait_and_acquire() (begun at `started`) under the policy of at least
  /// `retry`'s version.
  Task<Attempted> acquire_in_force(const std::string& key, std::int64_t permits,
                                   const OwnedAcquireOptions& options,
                                   std::chrono::steady_clock::time_point started,
                                   const StaleRetry& retry);
  /// The end of an observed call as the observer sees it: rethrows `error`, else returns the
  /// decision. `max_wait`: acquire()'s; `slept`: it suspended to wait.
  Decision finish(ObservedCall& call, const std::exception_ptr& error,
                  std::optional<Decision>& decision, std::string_view key, std::int64_t permits,
                  std::optional<std::chrono::microseconds> max_wait, bool slept);
  /// At the first decision: has the client add this limiter's counts to the fleet's.
  void publish_counts();
  /// `call(enforcer, request)` (a Task<T>) on the request for `key` under the policy in force,
  /// asked again when refused as stale; an unreadable store raises Unavailable.
  template <class T, class Call>
  static Task<T> in_force_asking_again(std::shared_ptr<PolicyEnforcer> self, std::string key,
                                       Operation operation, std::int64_t permits, Call call);
  /// Whether a denial of `request` may be remembered (DenyCache).
  bool may_cache(const DecideRequest& request) const noexcept;
  /// The request under the fallback's scaled policy.
  DecideRequest fallback_request(const DecideRequest& request) const;
  /// Applies `adjustment` to `request`'s key, in the fallback's state too when there is one.
  Task<void> adjust_under(DecideRequest request, Adjustment adjustment, std::int64_t amount);
  /// The failure policy's answer for a follower's call whose stored policy could not be
  /// confirmed: `request` is under the policy read last.
  Decision answer_unconfirmed(const DecideRequest& request);
  /// The fallback's scaled policy for a request under `source`.
  std::shared_ptr<const CompiledPolicy> fallback_policy_for(
      const std::shared_ptr<const CompiledPolicy>& source) const;

  uv_loop_t* loop_;
  LoopTurn turn_{loop_};  ///< see turn()
  // Why before the backend: destroyed after it, since the backend sends through it.
  std::shared_ptr<const CommandDispatcher> redis_;  ///< the client's; null for in process
  std::shared_ptr<StatsPublisher> stats_;           ///< the client's; null: counts unpublished
  LimiterOptions options_;
  std::string escaped_name_;
  std::unique_ptr<PolicySource> source_;
  std::unique_ptr<Backend> backend_;
  WaiterRegistry waiters_{*backend_};
  std::unique_ptr<LocalBackend> fallback_;  ///< local_fallback
  DenyCache deny_cache_;
  /// Counts resets, adjustments, give-backs and policy changes (see decide()).
  std::uint64_t generation_ = 0;
  /// `<escaped name>%@<client id>`: the name part of Scope::per_client keys (never an escaped
  /// name, where '%' is followed by two hex digits).
  std::string per_client_name_;
  /// The fallback's scaled policy (local_share x) and the policy it was scaled from.
  mutable std::shared_ptr<const CompiledPolicy> fallback_source_;
  mutable std::shared_ptr<const CompiledPolicy> fallback_policy_;
  std::shared_ptr<spdlog::logger> logger_;
  /// Counts, shadows and reports each call's end (after options_ and logger_: made from them).
  CallObserver observer_;
  bool counts_published_ = false;  ///< publish_counts() was called
};

/// One attempt of PolicyEnforcer::in_force_asking_again().
template <class T, class Call>
Task<T> in_force_once(const std::shared_ptr<PolicyEnforcer>& self, const std::string& key,
                      Operation operation, std::int64_t permits, const Call& call,
                      const StaleRetry& retry) {
  PolicyEnforcer::InForce in_force =
      co_await PolicyEnforcer::request_in_force(self, key, operation, permits, retry.min_version(),
                                                retry.deadline(), WhenUnread::unavailable);
  co_return co_await call(*self, std::move(in_force.request));
}

template <class T, class Call>
Task<T> PolicyEnforcer::in_force_asking_again(std::shared_ptr<PolicyEnforcer> self, std::string key,
                                              Operation operation, std::int64_t permits,
                                              Call call) {
  const auto attempt = [&](const StaleRetry& retry) {
    return in_force_once<T>(self, key, operation, permits, call, retry);
  };
  StaleRetry retry(self->stale_deadline());
  co_return co_await asking_again(std::move(retry), attempt, self->named());
}

}  // namespace redlimit::detail
