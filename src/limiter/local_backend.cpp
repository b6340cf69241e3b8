#include "limiter/local_backend.hpp"

#include <algorithm>
#include <chrono>

#include "policy/stale_policy.hpp"

namespace redlimit::detail {
namespace {

/// True if `state` is of a key that acquire() reserved on.
bool reserved_on(const std::optional<LimitState>& state) {
  if (!state) return false;
  if (const auto* time = std::get_if<GcraState>(&*state)) return time->book.version > 0;
  if (const auto* tokens = std::get_if<TokenBucketState>(&*state)) return tokens->book.version > 0;
  return false;
}

/// When Redis drops a key a script wrote at `now` with `state`, which matters `ttl_us`: the
/// scripts write the TTL in whole milliseconds, rounded up, at least 1, and reserved_grace_ms
/// more on a key reserved on (lua/lib/write_frac_time.lua, PX), and Redis expires a key only
/// once its millisecond clock is past the write's millisecond plus that TTL, so the key lives
/// through the whole millisecond its TTL ends in.
std::int64_t redis_expiry(std::int64_t now, std::int64_t ttl_us,
                          const std::optional<LimitState>& state) {
  std::int64_t ttl_ms = std::max<std::int64_t>(1, ceil_div(ttl_us, 1000));
  if (reserved_on(state)) ttl_ms += reserved_grace_ms;
  return (floor_div(now, 1000) + ttl_ms + 1) * 1000;
}

/// The decision of `request` from a limit's outcome (its binding limit's, for a policy).
Decision decision_of(const LimitOutcome& outcome, const DecideRequest& request) {
  Decision decision;
  decision.allowed = outcome.allowed;
  decision.limit = outcome.limit;
  decision.remaining = outcome.remaining;
  decision.retry_after = std::chrono::microseconds(outcome.retry_after_us);
  decision.reset_after = std::chrono::microseconds(outcome.reset_after_us);
  decision.source = Source::local;
  decision.policy_version = request.policy->epoch().version;
  return decision;
}

/// Calls the handlers of `watchers` (id -> key, handler) that watch `key` with `args`.
template <class Watchers, class... Args>
void notify(const Watchers& watchers, std::string_view key, const Args&... args) {
  // Why a copy: a handler may unwatch.
  const Watchers copy = watchers;
  for (const auto& [id, watcher] : copy) {
    if (watcher.first == key) watcher.second(args...);
  }
}

}  // namespace

LocalBackend::LocalBackend(Clock clock) : clock_(std::move(clock)) {}

std::int64_t LocalBackend::system_clock() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

LocalBackend::Entry& LocalBackend::entry_for(const DecideRequest& request, std::int64_t now) {
  while (!by_expiry_.empty() && by_expiry_.begin()->first <= now) {
    // Why find first: erasing by a reference to the node's own key would read it while erasing.
    entries_.erase(entries_.find(*by_expiry_.begin()->second));
    by_expiry_.erase(by_expiry_.begin());
  }
  const auto& limits = request.policy->limits();
  auto it = entries_.find(request.key_base.view());
  if (it == entries_.end()) it = entries_.try_emplace(request.key_base.str()).first;
  Entry& entry = it->second;
  // Why only grow: a limit removed and added back finds its state, as its Redis key would be.
  if (entry.states.size() < limits.size()) {
    entry.states.resize(limits.size());
    entry.slots.resize(limits.size());
  }
  // A limit whose state expired, or that now uses another algorithm, starts afresh (in Redis its
  // key would be gone, or be another key).
  for (std::size_t i = 0; i < limits.size(); ++i) {
    if (!entry.slots[i].holds(limits[i].limit.algorithm, now)) {
      entry.states[i].reset();
      entry.slots[i] = Slot{limits[i].limit.algorithm, 0};
    }
  }
  return entry;
}

void LocalBackend::store(const DecideRequest& request, Entry& entry, bool written,
                         const std::vector<std::optional<std::int64_t>>& ttls_us,
                         std::int64_t now) {
  const std::string_view key = request.key_base.view();
  if (!written) {
    if (!entry.expiry) entries_.erase(entries_.find(key));  // nothing was stored for this key
    return;
  }
  for (std::size_t i = 0; i < ttls_us.size(); ++i) {
    if (ttls_us[i]) entry.slots[i].expires_us = redis_expiry(now, *ttls_us[i], entry.states[i]);
  }
  std::int64_t entry_expires = 0;
  for (const Slot& slot : entry.slots)
    entry_expires = std::max(entry_expires, slot.expires_us);
  if (entry.expiry) by_expiry_.erase(*entry.expiry);
  entry.expiry = by_expiry_.emplace(entry_expires, &entries_.find(key)->first);
}

Decision LocalBackend::decide_now(const DecideRequest& request) {
  const std::int64_t now = now_of(request);
  Entry& entry = entry_for(request, now);
  const bool write = request.operation == Operation::acquire;
  const PolicyOutcome outcome =
      decide_policy(request.policy->specs(), entry.states, now, request.permits,
                    write ? Mode::acquire : Mode::peek, request.policy->change());
  // Written: every limit when allowed, else those whose state was carried over to this policy.
  std::vector<std::optional<std::int64_t>> ttls(outcome.limits.size());
  bool wrote = false;
  for (std::size_t i = 0; write && outcome.stale_version == 0 && i < ttls.size(); ++i) {
    if (outcome.allowed || outcome.limits[i].rewritten) {
      ttls[i] = outcome.limits[i].ttl_us;
      wrote = true;
    }
  }
  store(request, entry, wrote, ttls, now);
  if (outcome.stale_version != 0) throw StalePolicy(outcome.stale_version, request.claim);

  Decision decision = decision_of(outcome.binding_outcome(), request);
  decision.allowed = outcome.allowed;
  decision.binding = outcome.binding;
  return decision;
}

ReserveOutcome LocalBackend::reserve_outcome(const DecideRequest& request, std::int64_t now,
                                             std::int64_t max_wait_us, std::int64_t not_before_us,
                                             bool dry) {
  const LimitSpec& spec = request.policy->specs().front();
  if (dry) {
    // The first limit's state as entry_for() would find it, read only.
    std::optional<LimitState> state;
    const auto it = entries_.find(request.key_base.view());
    if (it != entries_.end() && !it->second.states.empty() &&
        it->second.slots[0].holds(request.policy->limits()[0].limit.algorithm, now)) {
      state = it->second.states[0];
    }
    return detail::reserve(spec, state, now, request.permits, max_wait_us, request.policy->change(),
                           not_before_us);
  }
  Entry& entry = entry_for(request, now);
  ReserveOutcome outcome = detail::reserve(spec, entry.states[0], now, request.permits, max_wait_us,
                                           request.policy->change(), not_before_us);
  store(request, entry, outcome.decision.allowed || outcome.decision.rewritten,
        {outcome.decision.ttl_us}, now);
  return outcome;
}

Reservation LocalBackend::reserve_now(const DecideRequest& request, std::int64_t max_wait_us) {
  const std::int64_t now = now_of(request);
  const ReserveOutcome outcome = reserve_outcome(request, now, max_wait_us, 0, false);
  if (outcome.decision.stale_version != 0) throw StalePolicy(outcome.decision.stale_version);
  const LimitSpec& spec = request.policy->specs().front();
  return {.decision = decision_of(outcome.decision, request),
          .wait_us = outcome.wait_us,
          .slot = outcome.slot,
          .den = spec.a,
          .d = spec.b,
          .book = outcome.book,
          .reserved_at_us = now};
}

Task<void> LocalBackend::run(std::span<BackendOp> ops) {
  return run_each(ops, [this](auto& op) { return perform(op); });
}

Task<void> LocalBackend::perform(ReserveGroupOp& op) {
  const std::span<const DecideRequest> requests = op.requests;
  const std::int64_t now = now_of(requests.front());
  const ReserveAllOutcome outcome = reserve_at_one_slot(
      requests.size(), now,
      [&](std::size_t c, std::int64_t not_before_us, bool dry) {
        return reserve_outcome(requests[c], now, op.max_wait_us, not_before_us, dry);
      },
      op.earliest_slot_us, op.earliest_only);
  const DecideRequest& binding = requests[outcome.binding];
  if (outcome.decision.stale_version != 0)
    throw StalePolicy(outcome.decision.stale_version, binding.claim);
  ClaimsReservation& out = op.result;
  out = {.decision = decision_of(outcome.decision, binding),
         .wait_us = outcome.wait_us,
         .slot_us = outcome.slot_us};
  out.decision.claim = binding.claim;
  for (std::size_t i = 0; i < outcome.claims.size(); ++i) {
    const ReserveOutcome& part = outcome.claims[i];
    const LimitSpec& spec = requests[i].policy->limits().front().spec;
    out.claims.push_back({.ticket = ticket_of(part.slot, spec.a, spec.b, part.book)});
  }
  co_return;
}

Task<void> LocalBackend::perform(DecideOp& op) {
  op.result = decide_now(op.request);
  co_return;
}

Task<void> LocalBackend::perform(AdjustOp& op) {
  const DecideRequest& request = op.request;
  const std::int64_t now = now_of(request);
  Entry& entry = entry_for(request, now);
  op.result = adjust_policy(request.policy->specs(), entry.states, now, op.adjustment, op.amount,
                            request.policy->change(), op.taken_at_us, entry.reset_at);
  store(request, entry, op.result.applied, op.result.ttl_us, now);
  if (op.result.stale_version != 0) throw StalePolicy(op.result.stale_version);
  co_return;
}

Task<void> LocalBackend::perform(ReserveOp& op) {
  op.result = reserve_now(op.request, op.max_wait_us);
  co_return;
}

CancelVerdict LocalBackend::cancel_now(const DecideRequest& request, const CancelTicket& ticket) {
  const std::int64_t now = now_of(request);
  Entry& entry = entry_for(request, now);
  const CancelOutcome outcome =
      cancel_reservation(request.policy->specs().front(), entry.states[0], now, request.permits,
                         ticket, request.policy->change());
  const bool returned = outcome.verdict == CancelVerdict::returned;
  store(request, entry, returned, {outcome.ttl_us}, now);
  if (!returned) {
    if (outcome.stale_version != 0) throw StalePolicy(outcome.stale_version, request.claim);
    return outcome.verdict;
  }
  const CancelNotice notice{.cancels = outcome.book.cancels,
                            .epoch = outcome.book.epoch,
                            .cancelled = ticket.version,
                            .shift = outcome.shift,
                            .den = outcome.den};
  notify(watchers_, reservation_key(request), notice);
  return CancelVerdict::returned;
}

Task<void> LocalBackend::perform(ReservationOp& op) {
  const DecideRequest& request = op.request;
  ReservationReply& reply = op.result;
  if (op.operation == ReservationOperation::cancel) {
    reply.verdict = cancel_now(request, op.ticket);
  } else if (op.operation != ReservationOperation::renew) {
    const std::int64_t now = now_of(request);
    Entry& entry = entry_for(request, now);
    // Why a copy: an entry created here is erased before the answer (an ask stores nothing).
    const std::optional<LimitState> state = entry.states[0];
    store(request, entry, false, {}, now);
    reply.lease_held = true;
    reply.where = reservation_standing(state, op.ticket);
  }
  co_return;
}

// Why `on_confirmed` is never called: in process, every notice is heard as it is made.
std::uint64_t LocalBackend::watch(const DecideRequest& request, NoticeHandler handler,
                                  std::function<void()>) {
  watchers_.emplace(next_watch_, std::make_pair(reservation_key(request), std::move(handler)));
  return next_watch_++;
}

void LocalBackend::unwatch(std::uint64_t id) {
  watchers_.erase(id);
  release_watchers_.erase(id);
}

Task<void> LocalBackend::perform(ResetOp& op) {
  const auto it = entries_.find(op.key_base);
  if (it == entries_.end()) co_return;
  for (std::optional<LimitState>& state : it->second.states)
    state.reset();
  it->second.reset_at = now_of(op);
}

Task<void> LocalBackend::perform(TtlOp&) {
  co_return;
}

Task<void> LocalBackend::perform(LeaseOp& op) {
  const LeaseRequest& request = op.request;
  const std::int64_t now = now_of(request);
  switch (op.operation) {
    case LeaseOperation::grant:
      op.result = leases_.grant(request, now);
      break;
    case LeaseOperation::renew:
      op.result = leases_.renew(request, now);
      break;
    case LeaseOperation::release:
      op.result = leases_.release(request, now);
      if (op.result.granted) notify(release_watchers_, request.key);
      break;
  }
  co_return;
}

std::uint64_t LocalBackend::watch_releases(std::string key, std::function<void()> handler) {
  release_watchers_.emplace(next_watch_, std::make_pair(std::move(key), std::move(handler)));
  return next_watch_++;
}

}  // namespace redlimit::detail
