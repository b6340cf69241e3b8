#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "algorithms/policy_model.hpp"
#include "limiter/backend.hpp"
#include "limiter/semaphore_leases.hpp"

namespace redlimit::detail {

/// Runs the algorithms' C++ models in process, with state per key in memory. Each limit's state
/// expires when Redis would drop its key (its TTL in whole milliseconds, rounded up); expired
/// keys are evicted on every call, so memory is bounded by the keys active within the longest
/// state lifetime.
class LocalBackend final : public Backend {
 public:
  /// Microseconds since the Unix epoch; windows align to it as in Redis.
  using Clock = std::function<std::int64_t()>;

  explicit LocalBackend(Clock clock = system_clock);
  Task<void> run(std::span<BackendOp> ops) override;
  std::uint64_t watch(const DecideRequest& request, NoticeHandler handler,
                      std::function<void()> on_confirmed) override;
  std::uint64_t watch_releases(std::string key, std::function<void()> handler) override;
  void unwatch(std::uint64_t id) override;
  std::int64_t lease_us() const noexcept override { return 0; }
  BackgroundTasks* background() noexcept override { return nullptr; }

  /// The decision, synchronously (decide() wraps this).
  Decision decide_now(const DecideRequest& request);
  /// The reservation, synchronously (reserve() wraps this).
  Reservation reserve_now(const DecideRequest& request, std::int64_t max_wait_us);
  /// When `request` (a DecideRequest or LeaseRequest) is decided: its injected time, or now.
  template <class Request>
  std::int64_t now_of(const Request& request) const {
    return request.now_us != 0 ? request.now_us : clock_();
  }
  /// Keys that hold state, or the time of their reset while it matters (Entry::reset_at).
  std::size_t size() const noexcept { return entries_.size(); }
  static std::int64_t system_clock();

 private:
  struct Slot {
    Algorithm algorithm = Algorithm::gcra;
    std::int64_t expires_us = 0;
    /// Whether it holds a state of a limit of `limit_algorithm` at `now`.
    bool holds(Algorithm limit_algorithm, std::int64_t now) const {
      return algorithm == limit_algorithm && expires_us > now;
    }
  };
  struct Entry {
    std::vector<std::optional<LimitState>> states;
    std::vector<Slot> slots;
    /// Its node in by_expiry_; none until the call that created it stores something.
    std::optional<std::multimap<std::int64_t, const std::string*>::iterator> expiry;
    /// The time of its latest reset (Redis: its reset mark, lua/reset.lua), kept with the entry,
    /// which lives at least as long as the mark would: a give-back of a take made then or before
    /// gives nothing.
    std::optional<std::int64_t> reset_at;
  };

  // ---- each operation (Backend::run()). Each completes without suspending, except the claims'
  // (local_claims.cpp), which run claim after claim on each limiter's backend.
  Task<void> perform(DecideOp& op);
  Task<void> perform(AdjustOp& op);
  Task<void> perform(ResetOp& op);
  Task<void> perform(TtlOp& op);
  Task<void> perform(ReserveOp& op);
  /// Why no leases in process: no other process shares the state, and a dead process takes its
  /// reservations with it. None is registered, so none is renewed (renew answers 0), and
  /// confirm is locate.
  Task<void> perform(ReservationOp& op);
  /// Semaphores: LeaseTable.
  Task<void> perform(LeaseOp& op);
  Task<void> perform(DecideClaimsOp& op);
  Task<void> perform(ReserveClaimsOp& op);
  Task<void> perform(ReserveGroupOp& op);
  /// Gives back the reservation `ticket` (a ReservationOp's cancel).
  CancelVerdict cancel_now(const DecideRequest& request, const CancelTicket& ticket);
  /// The reservation's outcome at `now`, at `not_before_us` (0: its earliest slot), stale
  /// included; `dry`: decided only, nothing stored (reserve_group()'s reserve_at_one_slot()).
  ReserveOutcome reserve_outcome(const DecideRequest& request, std::int64_t now,
                                 std::int64_t max_wait_us, std::int64_t not_before_us, bool dry);
  /// The entry of `request`'s key (created if new), stale limits reset, expired keys evicted.
  Entry& entry_for(const DecideRequest& request, std::int64_t now);
  /// Ends a call on `entry`. When `written`, records that its limit i wrote a state that
  /// matters for `ttls_us[i]`, kept as long as Redis keeps its key (a limit without one keeps its
  /// expiry); else drops the entry if nothing was ever stored in it (this call created it).
  void store(const DecideRequest& request, Entry& entry, bool written,
             const std::vector<std::optional<std::int64_t>>& ttls_us, std::int64_t now);

  Clock clock_;
  std::unordered_map<std::string, Entry, KeyHash, std::equal_to<>> entries_;
  std::multimap<std::int64_t, const std::string*> by_expiry_;  ///< entry expiry -> its key
  std::map<std::uint64_t, std::pair<std::string, NoticeHandler>> watchers_;
  LeaseTable leases_;
  std::map<std::uint64_t, std::pair<std::string, std::function<void()>>> release_watchers_;
  std::uint64_t next_watch_ = 1;
};

}  // namespace redlimit::detail
