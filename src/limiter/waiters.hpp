#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include "limiter/backend.hpp"

namespace redlimit::detail {

/// The acquire() calls of one limiter that sleep on a reservation, per reservation key (the
/// key of the policy's only limit: another algorithm is another key). When a reservation on the
/// key is cancelled (by any process), the backend's notice moves every waiter behind it earlier
/// by the cancelled permits' time, and wakes it to sleep the shorter time. A key stays watched
/// for a while after its last waiter (the most recent 256 idle keys), so that a busy key is not
/// subscribed and unsubscribed for every acquire().
///
/// Notices can be late or lost (the subscription was down, or not yet confirmed when the
/// reservation was sent, or more arrived before a waiter registered than are kept). A waiter
/// whose key's subscription is confirmed (the first time, or after a reconnect) after its watch
/// began, or that takes a notice whose number skips one it has not heard of, is marked
/// `unheard`: it asks Redis where it stands while it sleeps, rather than waking at a slot that
/// moved. At its wake, Redis tells where it stands
/// (ReservationOperation::confirm), from its log of cancellations. A notice that arrives before
/// the reply of a reservation made before it is kept for a while and applied when that waiter
/// registers.
class WaiterRegistry {
 public:
  using Clock = std::chrono::steady_clock;

  /// One sleeping acquire(): its reservation and its local wake-up time.
  struct Waiter {
    FracTime slot;        ///< server time the permits may be used (fraction in 1/ticket.den)
    CancelTicket ticket;  ///< the reservation as made: what gives it back
    std::int64_t reserved_at_us = 0;
    std::int64_t heard = 0;  ///< the key's cancels up to the last notice taken into `slot`
    Clock::time_point wake;
    std::stop_source* reschedule = nullptr;  ///< requested when `wake` moved earlier, or unheard
    /// Notices may have gone unheard since its reservation (its key's subscription was
    /// confirmed after its watch began, or a notice's number skipped one): Redis is to be asked
    /// where it stands (Watch::locate()).
    bool unheard = false;
  };

  /// Watching a key (RAII): from before a reservation is sent until its waiter wakes, so that no
  /// notice in between is missed.
  class Watch {
   public:
    Watch(WaiterRegistry& registry, std::string key, std::uint64_t confirmations)
        : registry_(registry), key_(std::move(key)), confirmations_(confirmations) {}
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;
    ~Watch();
    /// Registers the waiter (after its reservation), applying notices that came before it.
    void add(Waiter* waiter);
    /// Moves the registered waiter to where Redis found its reservation (asked while it waits,
    /// ReservationOperation::locate), then by the notices kept that came after what the answer
    /// counts, if that is earlier than it stands.
    void locate(const StandingOutcome& where);

   private:
    WaiterRegistry& registry_;
    std::string key_;
    std::uint64_t confirmations_;  ///< its key's subscription confirmations when it began
    Waiter* waiter_ = nullptr;
  };

  explicit WaiterRegistry(Backend& backend) : backend_(backend) {}
  ~WaiterRegistry();

  /// Starts watching the key of `request`.
  std::unique_ptr<Watch> watch(const DecideRequest& request);
  /// Wakes every sleeping waiter to look again (the policy changed under their reservations).
  void wake_all();

 private:
  struct Key {
    std::uint64_t watch_id = 0;
    int watches = 0;
    std::uint64_t confirmations = 0;  ///< of its subscription, so far
    std::vector<Waiter*> waiters;
    std::deque<CancelNotice> recent;  ///< the last notices, for waiters not yet registered
  };

  void on_notice(const std::string& key, const CancelNotice& notice);
  void on_confirmed(const std::string& key);
  static void apply(Waiter& waiter, const CancelNotice& notice);
  /// Moves `waiter`'s slot to `to`, and its wake by as much, if that is earlier.
  static void move_earlier(Waiter& waiter, FracTime to);
  static void mark_unheard(Waiter& waiter);

  Backend& backend_;
  std::map<std::string, Key> keys_;
  std::deque<std::string> idle_;  ///< watched keys without watches, oldest first
};

}  // namespace redlimit::detail
