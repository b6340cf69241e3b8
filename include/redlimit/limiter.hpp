#pragma once
/// @file limiter.hpp
/// Limiter: applies a Policy per key, in Redis (shared by every process) or in process.

#include <uv.h>

#include <chrono>
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "redlimit/acquire_options.hpp"
#include "redlimit/callback.hpp"
#include "redlimit/decision_event.hpp"
#include "redlimit/failure_policy.hpp"
#include "redlimit/limit.hpp"
#include "redlimit/task.hpp"

namespace redlimit {

class Client;
class Metrics;

namespace detail {
class PolicyEnforcer;
class PolicyGauge;
}  // namespace detail

/// How a limiter names its keys and what it does when Redis cannot answer.
struct LimiterOptions {
  /// The namespace of this limiter's keys, e.g. "sms"; 1 to 128 bytes, any bytes.
  std::string name;
  /// The first part of every key: 1 to 64 characters from [A-Za-z0-9_.-].
  std::string prefix = "rl";
  FailurePolicy on_failure{};
  /// Remember "denied until T" locally when that is provably what Redis would answer.
  bool deny_cache = true;
  /// A limiter following a PolicyStore reads its policy again at least this often (besides on
  /// every change notice, which pub/sub loses while its connection is down): the bound on how
  /// long a change may go unseen. At least 1 ms.
  std::chrono::milliseconds policy_refresh{1000};
  /// Shadow mode: decisions are made and counted as usual, but every request is allowed. A
  /// request the limit denied gets `allowed = true` and `shadow_denied = true`, with the
  /// limit's own remaining and retry_after; it took nothing. acquire() never waits: it decides
  /// once, as try_acquire() does, and a denial it would have waited out (retry_after within
  /// max_wait) is an admission, not shadow_denied, whose retry_after is the wait it would have
  /// had (understated under contention: nothing is reserved, so each caller sees the wait for
  /// the next free slot, not its place in a queue). For trying a new limit on live traffic
  /// before enforcing it.
  bool shadow = false;
  /// Called when a try_acquire() or acquire() call ends (see DecisionEvent); empty: nothing is
  /// called, and it costs nothing.
  DecisionListener on_decision{};
  /// Where this limiter counts its calls: null counts into its client's (Client::metrics());
  /// an in-process limiter counts only when this is set.
  std::shared_ptr<Metrics> metrics{};
};

/// The state of one limit of a key, as Limiter::inspect() reads it.
struct LimitState {
  /// The limit, as in the policy (Policy::limits at the same index).
  Limit limit;
  /// The limit's state now, as peek() would answer under a policy of this limit alone: remaining,
  /// retry_after for one permit, reset_after. Consumes nothing.
  Decision state;
  /// The Redis key holding it.
  std::string redis_key;
  /// Its time to live in Redis; nullopt when the key does not exist (a fresh state) or for an
  /// in-process limiter.
  std::optional<std::chrono::milliseconds> ttl;
};

/// A number of permits of the limiter's shared key (its name): `limiter.try_acquire(Permits{5})`.
/// Explicit, so that an integer (a user id) never silently becomes a permit count.
class Permits {
 public:
  /// `count` permits.
  constexpr explicit Permits(std::int64_t count) noexcept : count_(count) {}
  /// How many.
  constexpr std::int64_t count() const noexcept { return count_; }

 private:
  std::int64_t count_;
};

/// A callback that takes a call's Result<Decision>: a lambda, a function, a std::function.
/// Why a concept, not std::function, in the overloads with defaults: a `{}` argument must keep
/// meaning AcquireOptions{} in `acquire(key, 1, {})`.
template <class Callback>
concept DecisionCallback = std::invocable<Callback&, Result<Decision>> &&
    std::convertible_to<Callback, std::function<void(Result<Decision>)>>;

/// Applies a Policy to keys (a user, an IP, an API key).
///
/// Keys in Redis are `<prefix>:{<name>:<key>}:<algorithm>:<index>`, with name and key escaped
/// so that different (name, key) pairs never share a Redis key, and every key of one decision
/// in one hash slot. Arguments are checked before any I/O (InvalidArgument, naming the field
/// and the accepted range).
///
/// Keys are strings. The limiter's name is the key of its one shared resource: try_acquire()
/// and acquire() without a key, and with Permits{n} for n permits of it. An integer is never a
/// key nor a permit count by itself: `try_acquire(user_id)` does not compile (write
/// `try_acquire(std::to_string(user_id))`).
///
/// Movable, non-copyable; a moved-from limiter may only be destroyed or assigned to. Use on the
/// loop's thread. The limiter keeps its Client's connections alive (they are shared): the Client
/// object may be destroyed first, though its close() still ends every command, this limiter's
/// included.
class Limiter {
 public:
  /// A limiter whose state lives in Redis, shared by every process that uses the same name.
  Limiter(Client& client, Policy policy, LimiterOptions options);
  /// A limiter that follows the policy stored under `options.name` in a PolicyStore (with the
  /// same prefix), and its per-key overrides: every decision carries the stored version
  /// (Decision::policy_version). The policy is read on the first call (which waits for it), read
  /// again within a round trip of each change notice and at least every
  /// `options.policy_refresh`, and when a script finds a key written under a newer version.
  /// With no policy stored, calls fail with PolicyNotFound (never an allow) until one is. When
  /// Redis cannot answer, decisions get the failure policy's answer under the policy read last
  /// (PolicyNotFound if none was read yet; inspect(), reset() and adjustments raise the
  /// Unavailable error instead). What was read is read again before the next decision once a
  /// connection to Redis ended (the server may have lost it: docs/failures.md). A waiting
  /// acquire() reserves again when the policy it waits under changes. set_policy() is an
  /// InvalidArgument: the store decides.
  Limiter(Client& client, LimiterOptions options);
  /// A limiter whose state lives in this process only (LocalBackend): the same algorithms,
  /// no Redis. Idle keys are evicted, so memory stays bounded.
  Limiter(uv_loop_t* loop, Policy policy, LimiterOptions options);
  ~Limiter();
  Limiter(const Limiter&) = delete;
  Limiter& operator=(const Limiter&) = delete;
  /// Takes over `other`'s state; calls in flight are unaffected.
  Limiter(Limiter&& other) noexcept;
  /// Drops this limiter's state (calls in flight keep what they need) and takes over `other`'s.
  Limiter& operator=(Limiter&& other) noexcept;

  /// Takes `permits` for `key` now if every limit allows it; never waits.
  Task<Decision> try_acquire(std::string key, std::int64_t permits = 1);
  /// try_acquire() on the limiter's own name as the key: one shared resource.
  Task<Decision> try_acquire(Permits permits = Permits{1});
  /// An integer as the first argument is a mistake (a user id taken as a permit count, or as
  /// a null `const char*`): pass a string key, or Permits{n} for the shared key.
  template <std::integral Integer, class... Rest>
  void try_acquire(Integer, Rest&&...) = delete;
  /// Takes `permits` for `key`, waiting (on a uv timer, never a thread) until they are free or
  /// `max_wait` would be exceeded (then a denial: nothing is taken, retry_after says when).
  ///
  /// For a policy of one gcra, token_bucket or leaky_bucket limit this is one round trip: the
  /// permits are reserved in Redis at the earliest time they fit and the call sleeps until
  /// then, so waiters are served in the order their reservations reached Redis, across all
  /// processes. Cancelling a waiting call (AcquireOptions::stop, or destroying its task) gives
  /// the reservation back, and the waiters behind it move earlier by exactly its share; the call
  /// then ends with Cancelled. If the reserved time had already come when the cancellation
  /// reached Redis, nothing goes back: the permits are the caller's and the call returns its
  /// decision.
  /// Other policies ask again at retry_after, which is not first-come first-served.
  ///
  /// A reservation is made when Redis runs the script: a call abandoned after sending it but
  /// before the reply (a timeout) may have reserved permits that nobody uses.
  ///
  /// `options` is read before this returns (the stop token is copied then), so
  /// `auto task = limiter.acquire(key, 1, {.stop = source.get_token()});` is safe to await later.
  Task<Decision> acquire(std::string key, std::int64_t permits = 1, AcquireOptions options = {});
  /// acquire() on the limiter's own name as the key.
  Task<Decision> acquire(Permits permits = Permits{1}, AcquireOptions options = {});
  /// An integer as the first argument is a mistake: see try_acquire().
  template <std::integral Integer, class... Rest>
  void acquire(Integer, Rest&&...) = delete;

  /// Callback style of try_acquire(), for code without coroutines: `done` is called from the
  /// loop, on a later iteration, with the decision or the error the coroutine would have thrown
  /// (bad input included). The limiter's state, and its Client's connections, live until then.
  void try_acquire(std::string key, std::int64_t permits,
                   std::function<void(Result<Decision>)> done);
  /// Callback style of acquire(): `done` is called when the permits are had, or with a denial
  /// (max_wait), Cancelled (options.stop) or another error.
  void acquire(std::string key, std::int64_t permits, AcquireOptions options,
               std::function<void(Result<Decision>)> done);
  /// Callback style of try_acquire() on the shared key.
  void try_acquire(Permits permits, std::function<void(Result<Decision>)> done);
  /// Callback style of acquire() on the shared key.
  void acquire(Permits permits, AcquireOptions options, std::function<void(Result<Decision>)> done);
  /// Callback style of try_acquire() for one permit of `key`: `limiter.try_acquire(key, cb)`.
  template <DecisionCallback Callback>
  void try_acquire(std::string key, Callback done) {
    try_acquire(std::move(key), 1, std::function<void(Result<Decision>)>(std::move(done)));
  }
  /// Callback style of acquire() for `permits` of `key`, with the default AcquireOptions.
  template <DecisionCallback Callback>
  void acquire(std::string key, std::int64_t permits, Callback done) {
    acquire(std::move(key), permits, AcquireOptions{},
            std::function<void(Result<Decision>)>(std::move(done)));
  }
  /// Callback style of acquire() for one permit of `key`, with the default AcquireOptions.
  template <DecisionCallback Callback>
  void acquire(std::string key, Callback done) {
    acquire(std::move(key), 1, std::move(done));
  }
  /// Callback style of try_acquire() for one permit of the shared key.
  template <DecisionCallback Callback>
  void try_acquire(Callback done) {
    try_acquire(Permits{1}, std::function<void(Result<Decision>)>(std::move(done)));
  }
  /// Callback style of acquire() for `permits` of the shared key, with the default
  /// AcquireOptions.
  template <DecisionCallback Callback>
  void acquire(Permits permits, Callback done) {
    acquire(permits, AcquireOptions{}, std::function<void(Result<Decision>)>(std::move(done)));
  }
  /// Callback style of acquire() for one permit of the shared key.
  template <DecisionCallback Callback>
  void acquire(Callback done) {
    acquire(Permits{1}, std::move(done));
  }

  /// The state of `key` now, as a decision for one permit; consumes nothing and writes nothing.
  /// Every field means the state now: `remaining` is the permits available now, `reset_after`
  /// the time until the limit is full again from now (0 on a fresh key), `retry_after` when a
  /// request for one permit could pass (0, with `allowed`, if it could now).
  Task<Decision> peek(std::string key);
  /// Every limit's state for `key`, in the policy's order (for a follower: the key's stored
  /// policy, its override if it has one). Consumes nothing, writes nothing.
  Task<std::vector<LimitState>> inspect(std::string key);
  /// Forgets the state of `key`: it starts again full. Keeps the time of the reset (in Redis,
  /// `<key's base>:reset`, for as long as the deleted state would have lived; in process, in
  /// memory), so that a give-back of a permit taken before the reset, arriving after it, gives
  /// nothing back.
  Task<void> reset(std::string key);
  /// Gives `permits` of `key` back under every limit of its policy: a request that turned out
  /// not to count (the backend failed, the response was cached). Never beyond the capacity.
  /// gcra, token_bucket and leaky_bucket: the TAT, level or queue moves back by `permits`, at
  /// most to full; exact when the key could not have refilled them since they were taken (a
  /// refund within permits x T of the take, or no moment full since), else up to `permits` more
  /// than exact, never beyond the capacity. Window algorithms give back to the window holding now,
  /// which must hold the permits: fixed_window and sliding_window_counter exactly;
  /// sliding_window_log drops the oldest permits in its window (if the refunded ones were newer,
  /// permits come free later than exact, never earlier). All limits or none: AdjustmentRefused,
  /// changing nothing, when a window holds fewer permits than refunded (a past window's cannot be
  /// given back). Checked as try_acquire() checks (1 <= permits <= the policy's capacity). Forgets
  /// the key's remembered denial (LimiterOptions::deny_cache). A follower applies it under the
  /// key's stored policy. Redis errors are thrown (the failure policy does not apply: nothing is
  /// decided).
  Task<void> refund(std::string key, std::int64_t permits);
  /// Takes `permits` of `key` under every limit of its policy without asking: what is not
  /// available becomes a debt the key pays off (at the limit's rate, or as its window passes)
  /// before it admits again. gcra and leaky_bucket keep the debt in the time they store (at
  /// most until 2^52 us since the epoch), token_bucket in its level (at most what it holds
  /// exactly), the window algorithms in their current window's count. Checked as try_acquire()
  /// checks (1 <= permits <= the policy's capacity: penalize again for more).
  Task<void> penalize(std::string key, std::int64_t permits);
  /// Denies `key` until `duration` from now (Redis's clock): the first permit passes then, none
  /// before; afterwards a bucket starts empty and fills at its rate (a sliding_window_log still
  /// counts the permits of its window). Exact for gcra and leaky_bucket (up to four years), for
  /// token_bucket while the debt fits its exact level (duration x rate at most about 2^52 / d
  /// tokens: InvalidArgument beyond, e.g. after about 21 days at 12,345/s), and for
  /// sliding_window_log up to its window; fixed_window and sliding_window_counter cannot represent
  /// it: AdjustmentRefused before any I/O (as for a sliding_window_log block longer than its
  /// window). A block shorter than the key's current wait changes nothing. The deny cache takes the
  /// block's denial from the next decision on.
  Task<void> block(std::string key, std::chrono::microseconds duration);
  /// Replaces the policy from the next call on. State carries over per limit position and
  /// algorithm (see docs/algorithms.md, "Changing a policy"), as `carry` says, from the moment
  /// of this call: Carry::as_is keeps the permits available then, capped at the new capacity
  /// (tightening never frees a permit; a leaky bucket keeps its queue, which departs at the new
  /// rate), Carry::proportional scales them by the capacity ratio,
  /// Carry::reset starts every key full, once per key, also with the same policy (see
  /// "`set_policy` and `Carry::reset`" there). A key's state is converted once, on its next
  /// decision (allowed or denied), and its expiry follows the new policy. Waiting acquire()
  /// calls give their reservations back and reserve again under the new policy. A change of
  /// Policy::scope starts every key afresh, so it is an InvalidArgument unless `carry` is
  /// Carry::reset. On a limiter that follows a PolicyStore: InvalidArgument (the store decides).
  void set_policy(Policy policy, Carry carry = Carry::as_is);
  /// The policy in effect (a copy: set_policy() may replace it); for a follower, the name's
  /// policy read last (an empty policy before the first read).
  Policy policy() const;
  /// The policy in effect, as policy() tells it, without a copy: the object never changes
  /// (set_policy(), or another stored version read, puts another in its place), so the pointer
  /// tells whether the policy changed since it was last asked for. Use on the loop's thread.
  std::shared_ptr<const Policy> shared_policy() const;
  /// What a call over several limiters' claims (try_acquire_all(), acquire_all(), peek_all())
  /// reaches of this limiter: its state, which the call keeps alive; null once moved from.
  const std::shared_ptr<detail::PolicyEnforcer>& enforcer() const noexcept { return enforcer_; }

 private:
  /// Shows the policy in force in the metrics; declared first: the follower is made with it.
  std::shared_ptr<const detail::PolicyGauge> gauge_;
  std::shared_ptr<detail::PolicyEnforcer> enforcer_;
};

/// One part of a decision over several keys: `permits` of `key` under `limiter`'s policy.
struct Claim {
  Limiter* limiter = nullptr;
  std::string key;
  std::int64_t permits = 1;
};

/// Takes every claim's permits now if every limit of every claim allows them, else none (a
/// request limited per user and for the whole service spends nothing of the user's quota when
/// the service's limit denies it); never waits.
///
/// The claims' limiters use one Client (or are all in process), and each (limiter, key) appears
/// once. On one Redis server, and on a cluster when every claim's key is in one hash slot, this
/// is one script call, atomic. Across a cluster's slots, each slot's claims are one script call,
/// slot after slot (in the order of their first claim); when a slot denies (or fails), the
/// slots that took give back what their take still holds: permits are held, unused, for the
/// later slots' round trips and the give-backs' (one round trip, all at once), and a
/// bucket limit gets back its permits less the refill since the take; after a clock step back
/// or a policy change since the take, nothing (never more than exact: it may under-admit, never
/// over-admit). The decision is bound by the claim (Decision::claim) and its
/// limit (Decision::binding) with the longest retry_after when denied, the fewest permits
/// remaining when allowed. Each limiter counts the decision and tells its listener as its own
/// try_acquire() would, with the Redis time its own claim's key used as server_time_us (across
/// cluster slots each slot's call has its own; the caller gets the binding claim's). When Redis
/// cannot answer, each limiter's failure policy answers for its claim, and the request passes
/// only when every one allows it.
///
/// Throws InvalidArgument before any I/O for bad input: no claims, a null or moved-from
/// limiter, a bad key or permit count, a key claimed twice, limiters of different clients, or a
/// limiter in shadow mode.
///
/// With g++ 12, build the vector before a co_await: `co_await try_acquire_all({{...}, {...}})`
/// does not compile there (an initializer list inside a co_await expression).
Task<Decision> try_acquire_all(std::vector<Claim> claims);

/// Takes every claim's permits, waiting (on a uv timer) until every limit of every claim
/// allows them or `max_wait` would be exceeded (then a denial: nothing is taken). When every
/// claim's policy is one gcra, token_bucket or leaky_bucket limit (in Redis, keys in several
/// cluster slots too, or in process), it reserves on every key at one slot, the latest of their
/// earliest, and keeps its place in each key's queue (in Redis, Decision::server_time_us is
/// that slot; across cluster slots a round of calls, not atomic, that may hold permits unused
/// while it lasts); otherwise it asks again at each denial's retry_after (the longest of the
/// claims'), not first come, first served (docs/waiting.md). A stop request ends the wait with
/// Cancelled, its reservations given back. Checked as try_acquire_all() checks; the limiters'
/// state lives until the call ends. Each limiter counts the final decision, and tells its
/// listener the time its own claim's key was charged at (its slot's call, or after a wait the
/// slot), as try_acquire_all() does.
Task<Decision> acquire_all(std::vector<Claim> claims, AcquireOptions options = {});

/// The claims' state now, as one decision over them; consumes nothing and writes nothing:
/// `allowed` when try_acquire_all(claims) would pass now, and the binding claim's fields as its
/// limiter's peek() reports them (remaining: the permits available now). Checked as
/// try_acquire_all() checks its claims.
Task<Decision> peek_all(std::vector<Claim> claims);

}  // namespace redlimit
