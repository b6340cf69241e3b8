#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "algorithms/adjustments.hpp"
#include "algorithms/exact.hpp"
#include "algorithms/reservations.hpp"
#include "policy/compiled_policy.hpp"
#include "policy/key_format.hpp"
#include "redlimit/limit.hpp"
#include "redlimit/task.hpp"
#include "runtime/background_tasks.hpp"

namespace redlimit::detail {

class Backend;

enum class Operation { acquire, peek };

/// One request to a backend: a policy, the key it applies to, what to do.
/// Why a constructor: g++ 12 destroys an aggregate temporary built inside a co_await expression
/// twice; a class with a user-provided constructor is not affected.
struct DecideRequest {
  DecideRequest(std::shared_ptr<const CompiledPolicy> policy_, KeyBase key_base_,
                Operation operation_, std::int64_t permits_, std::int64_t now_us_ = 0)
      : policy(std::move(policy_)),
        key_base(std::move(key_base_)),
        operation(operation_),
        permits(permits_),
        now_us(now_us_) {}

  std::shared_ptr<const CompiledPolicy> policy;
  KeyBase key_base;  ///< `<prefix>:{<name>:<key>}`; each limit appends its suffix
  Operation operation = Operation::acquire;
  std::int64_t permits = 1;
  std::int64_t now_us = 0;  ///< tests only: an injected time; 0 uses the backend's clock
  /// Its place among the claims of a call over several (try_acquire_all()), 0 for one key: what
  /// a decision's `claim` and a StalePolicy name, however the backend groups the requests.
  std::size_t claim = 0;
};

/// The key acquire() reserves on: that of the policy's first (for reservations, only) limit.
inline std::string reservation_key(const DecideRequest& request) {
  return request.key_base.str() + request.policy->limits().front().key_suffix;
}

/// A reservation made for acquire() (single-limit gcra, token_bucket or leaky_bucket policies).
struct Reservation {
  Decision decision;                ///< allowed: reserved; else nothing was reserved
  std::int64_t wait_us = 0;         ///< how long after server_time_us the permits may be used
  FracTime slot;                    ///< that time, in server microseconds (fraction in 1/den)
  std::int64_t den = 1;             ///< the limit's reduced permits p
  std::int64_t d = 1;               ///< the limit's reduced period d (a cancel's shift)
  ReservationBook book;             ///< the key's after it: book.version is its place
  std::int64_t reserved_at_us = 0;  ///< the server time of the reservation
  /// Registered under its owner's lease (docs/waiting.md): the lease's expiry, server time; 0
  /// when not registered.
  std::int64_t lease_expiry_us = 0;
};

/// What a ReservationOperation needs to find a reservation at `slot` of a limit of reduced p `den`
/// and d `d`, with its key's `book` after it.
inline CancelTicket ticket_of(FracTime slot, std::int64_t den, std::int64_t d,
                              const ReservationBook& book) noexcept {
  return {.slot = slot,
          .den = den,
          .d = d,
          .version = book.version,
          .epoch = book.epoch,
          .cancels_before = book.cancels};
}

/// The ticket of `made` (allowed).
inline CancelTicket ticket_of(const Reservation& made) noexcept {
  return ticket_of(made.slot, made.den, made.d, made.book);
}

/// A cancelled reservation gave back its permits: those of its key and epoch behind it (version
/// above `cancelled`) made before it (fewer cancels in their book) may move earlier by `shift`.
struct CancelNotice {
  std::int64_t cancels = 0;    ///< the key's, this cancellation included
  std::int64_t epoch = 0;      ///< the key's epoch
  std::int64_t cancelled = 0;  ///< the version of the cancelled reservation
  FracTime shift;
  std::int64_t den = 1;  ///< the denominator of the shift's fraction
};

/// What a call on a reservation already made does (the reserve script's operations on one).
enum class ReservationOperation {
  cancel,  ///< gives its permits back if its slot is still ahead
  renew,   ///< extends its owner lease's registration (only the ticket's version is used)
  /// where it stands, for its waiter at the wake (it may have missed a notice): its owner
  /// lease's registration ends
  confirm,
  /// where it stands, for a waiter that may have missed notices while it sleeps (its key's
  /// subscription was confirmed after it began watching the key): nothing changes
  locate,
};

/// What a call on a reservation answered; each field is its operations'.
struct ReservationReply {
  CancelVerdict verdict = CancelVerdict::due;  ///< cancel
  /// renew: its owner lease's new expiry (server time), 0 if it is not held any more (reclaimed)
  std::int64_t lease_expiry_us = 0;
  bool lease_held = false;  ///< confirm: its owner lease's registration was still held (and ended)
  StandingOutcome where;    ///< confirm, locate
};

/// One call on a semaphore's key (lua/semaphore.lua). Why a constructor: as for DecideRequest.
struct LeaseRequest {
  LeaseRequest(std::string key_, std::string lease_id_, std::int64_t capacity_,
               std::int64_t permits_, std::int64_t ttl_us_, std::int64_t now_us_ = 0)
      : key(std::move(key_)),
        lease_id(std::move(lease_id_)),
        capacity(capacity_),
        permits(permits_),
        ttl_us(ttl_us_),
        now_us(now_us_) {}

  std::string key;       ///< `<prefix>:{<name>:<key>}:semaphore`
  std::string lease_id;  ///< made by the client, so that retrying a grant is idempotent
  std::int64_t capacity = 1;
  std::int64_t permits = 1;
  std::int64_t ttl_us = 1;  ///< grant, renew: how long the lease lives from now
  std::int64_t now_us = 0;  ///< tests only: an injected time; 0 uses the backend's clock
};

/// What a semaphore call does (the operations of lua/semaphore.lua).
enum class LeaseOperation {
  grant,    ///< grants the lease if its permits fit now (or it already holds them)
  renew,    ///< extends a lease that has not expired by the request's ttl from now
  release,  ///< gives a lease's permits back; never adds permits the lease does not hold
};

/// What a semaphore call answered.
struct LeaseReply {
  bool granted = false;  ///< grant, renew: the lease holds its permits; release: it gave some back
  std::int64_t now_us = 0;
  /// grant: the lease's expiry, or (refused) when enough leases expire for it to fit;
  /// renew: the new expiry (0 if refused).
  std::int64_t expires_or_free_at_us = 0;
};

/// A decision over several claims (a claim: a limiter, a key, a count), and the Redis time each
/// claim's key used.
struct ClaimsDecision {
  Decision decision;
  /// Per claim, the Redis time its own key was decided at (across cluster slots, each slot's
  /// script call has its own). Empty: decision.server_time_us for every claim.
  std::vector<std::int64_t> server_times_us{};
};

/// One claim's part of a reservation over several claims (acquire_all()).
struct ClaimReservation {
  CancelTicket ticket;               ///< on the claim's key: the common slot, and its place
  std::int64_t lease_expiry_us = 0;  ///< its owner lease's expiry (server time); 0: not registered
};

/// Several claims reserved at one slot, on every claim's key or none (lua/reserve.lua,
/// reserve_all).
struct ClaimsReservation {
  /// allowed: reserved; else nothing was (retry_after: the binding claim's wait). Its `claim`
  /// names the binding claim; server_time_us is when it was decided (0 in process).
  Decision decision{};
  std::int64_t wait_us = 0;  ///< how long after the decision the permits may be used
  /// That time, in server microseconds (in process, the limiters' clock). Across cluster slots
  /// with no wait, the binding claim's (each claim's own is its ticket's slot).
  std::int64_t slot_us = 0;
  /// Per request, when allowed; each ticket's slot is where its key took the permits.
  std::vector<ClaimReservation> claims{};
};

/// The binding one of `decisions` (one per claim), as the decide script picks it: all allowed,
/// the fewest remaining; else the denied one of the longest retry_after (the first on a tie).
/// Its `claim` names it, and `allowed` is whether every decision was.
Decision binding_decision(std::span<const Decision> decisions);

// ---- The operations a backend runs, as values: each holds what it is asked and, once run, its
// result. Why values: a capability is one more operation, not one more method of every backend,
// and a caller can hand a backend several at once (Backend::run()).

/// Decides `request` (try_acquire(), peek()). Why a reference: the caller keeps the request, and
/// a copy per layer would copy the key per decision.
struct DecideOp {
  const DecideRequest& request;
  Decision result{};
};

/// Adjusts the request's key under every limit of its policy, all or nothing
/// (lua/shapes/adjust.lua): `amount` is the permits, or the block's duration in us;
/// `taken_at_us`, give_back's time of the take (else 0). The request's operation and permits
/// are not used.
struct AdjustOp {
  const DecideRequest& request;
  Adjustment adjustment = Adjustment::refund;
  std::int64_t amount = 0;
  std::int64_t taken_at_us = 0;
  AdjustOutcome result{};
};

/// Forgets the state of every limit of `policy` for `key_base`, and marks the time of the reset
/// so that a give-back of a take made before it gives nothing (the reset gave everything back).
/// `now_us`: the time, for tests only, or 0 for the backend's clock.
struct ResetOp {
  std::shared_ptr<const CompiledPolicy> policy;
  std::string key_base;
  std::int64_t now_us = 0;
};

/// The time to live of the state under `key` (a key base and a limit's suffix); none when there
/// is none, or in process.
struct TtlOp {
  std::string key;
  std::optional<std::chrono::milliseconds> result{};
};

/// Reserves the request's permits if they fit within `max_wait_us`.
struct ReserveOp {
  DecideRequest request;
  std::int64_t max_wait_us = 0;
  Reservation result{};
};

/// Runs `operation` on the reservation `ticket` of the request's permits on its key.
struct ReservationOp {
  ReservationOperation operation = ReservationOperation::cancel;
  DecideRequest request;
  CancelTicket ticket;
  ReservationReply result{};
};

/// Runs `operation` on the request's lease (semaphores: they share nothing with the decide
/// scripts).
struct LeaseOp {
  LeaseOperation operation = LeaseOperation::grant;
  LeaseRequest request;
  LeaseReply result{};
};

// Several claims, run by the first claim's backend: claim i is requests[i] on backends[i]; their
// limiters use this backend's Client, or are all in process.

/// Decides every request at once, all or nothing: Decision::claim and binding name the binding
/// request and its limit. StalePolicy (with its claim) when a key holds a newer policy's state.
struct DecideClaimsOp {
  std::span<Backend* const> backends;
  std::span<const DecideRequest> requests;
  Operation operation = Operation::acquire;
  ClaimsDecision result{};
};

/// Reserves every request's permits at one slot, the latest of their keys' earliest, if that is
/// within `max_wait_us()` (what is left of the call's max_wait when asked), on every key or none;
/// each policy is a single limit that can be reserved on. A reservation waiting longer than
/// Backend::lease_us() is registered under its owner's lease. StalePolicy as DecideClaimsOp.
struct ReserveClaimsOp {
  std::span<Backend* const> backends;
  std::span<const DecideRequest> requests;
  std::function<std::int64_t()> max_wait_us;
  ClaimsReservation result{};
};

/// ReserveClaimsOp of requests one backend decides in one atomic step (in Redis, one hash slot's
/// keys), no earlier than `earliest_slot_us` (0: none); `earliest_only`: the slot, or the
/// denial, as it would be decided, with nothing written and no claims.
struct ReserveGroupOp {
  std::span<const DecideRequest> requests;
  std::int64_t max_wait_us = 0;
  std::int64_t earliest_slot_us = 0;
  bool earliest_only = false;
  ClaimsReservation result{};
};

/// An operation for Backend::run().
using BackendOp = std::variant<DecideOp, AdjustOp, ResetOp, TtlOp, ReserveOp, ReservationOp,
                               LeaseOp, DecideClaimsOp, ReserveClaimsOp, ReserveGroupOp>;

/// Runs the algorithms: in Redis (RedisBackend) or in process (LocalBackend). Requests arrive
/// validated.
class Backend {
 public:
  using NoticeHandler = std::function<void(const CancelNotice&)>;

  virtual ~Backend() = default;
  /// Runs every operation of `ops`, each to its result; several together, as Together runs
  /// tasks (in Redis their script calls coalesce), then throws the first error. `ops` stays
  /// valid until the task ends (co_await it at once).
  virtual Task<void> run(std::span<BackendOp> ops) = 0;

  // ---- One operation, run alone: its result. A frame more than run(): the decision path
  // calls run(). What they take by reference stays valid until the task ends (co_await it at
  // once).
  Task<Decision> decide(const DecideRequest& request);
  Task<AdjustOutcome> adjust(const DecideRequest& request, Adjustment adjustment,
                             std::int64_t amount, std::int64_t taken_at_us);
  Task<void> reset(std::shared_ptr<const CompiledPolicy> policy, std::string key_base,
                   std::int64_t now_us = 0);
  Task<std::optional<std::chrono::milliseconds>> ttl(std::string key);
  Task<Reservation> reserve(DecideRequest request, std::int64_t max_wait_us);
  Task<ReservationReply> run_reservation(ReservationOperation operation, DecideRequest request,
                                         CancelTicket ticket);
  Task<LeaseReply> run_lease(LeaseOperation operation, LeaseRequest request);
  Task<ClaimsDecision> decide_claims(std::span<Backend* const> backends,
                                     std::span<const DecideRequest> requests, Operation operation);
  Task<ClaimsReservation> reserve_claims(std::span<Backend* const> backends,
                                         std::span<const DecideRequest> requests,
                                         std::function<std::int64_t()> max_wait_us);
  Task<ClaimsReservation> reserve_group(std::span<const DecideRequest> requests,
                                        std::int64_t max_wait_us, std::int64_t earliest_slot_us,
                                        bool earliest_only);

  /// Calls `handler` for cancellations on the request's reservation key (by any process), and
  /// `on_confirmed` whenever notices may have gone unheard until then (its subscription
  /// confirmed, the first time or after a reconnect), until unwatch(id). Neither may resume
  /// coroutines inline.
  virtual std::uint64_t watch(const DecideRequest& request, NoticeHandler handler,
                              std::function<void()> on_confirmed) = 0;
  /// Calls `handler` at each release of permits of the semaphore key `key` (by any process), and
  /// whenever a release may have gone unheard (its subscription confirmed, the first time or
  /// after a reconnect), until unwatch(id). The handler must not resume coroutines inline.
  virtual std::uint64_t watch_releases(std::string key, std::function<void()> handler) = 0;
  /// Ends a watch() or a watch_releases().
  virtual void unwatch(std::uint64_t id) = 0;
  /// The owner lease of the reservations that wait longer than it, in us; 0 in process.
  virtual std::int64_t lease_us() const noexcept = 0;

  /// Where this backend's background work runs (the client's, which Client::close() waits
  /// for); null in process, where calls complete without suspending.
  virtual BackgroundTasks* background() noexcept = 0;
};

/// Runs `one(op)` for every operation of `ops` together.
Task<void> run_together(std::span<BackendOp> ops, std::function<Task<void>(BackendOp&)> one);

/// Backend::run() of a backend whose `perform(op)` runs one operation (a Task<void> that sets
/// its result): one alone is perform's own task (no frame more: a decision's budget), several run
/// together.
template <class Perform>
Task<void> run_each(std::span<BackendOp> ops, Perform perform) {
  if (ops.size() == 1) return std::visit(perform, ops.front());
  return run_together(ops, [perform](BackendOp& op) mutable { return std::visit(perform, op); });
}

/// What gives back one claim's part of a call over several: its reservation `ticket` cancelled,
/// or with none, what its take at `taken_at_us` still holds. `request` outlives the operation.
BackendOp give_back_op(const DecideRequest& request, std::optional<CancelTicket> ticket,
                       std::int64_t taken_at_us);

/// Runs `give_backs` (give_back_op()s) on `backend`, all at once. Why errors are dropped: a part
/// that cannot be given back stays taken until its slot (under-admission, never over).
Task<void> give_back_claims(Backend& backend, std::vector<BackendOp> give_backs);

}  // namespace redlimit::detail
