#include "limiter/waiters.hpp"

#include <algorithm>

namespace redlimit::detail {

constexpr std::size_t recent_notices = 64;
constexpr std::size_t idle_keys = 256;

WaiterRegistry::~WaiterRegistry() {
  for (const auto& [name, key] : keys_)
    backend_.unwatch(key.watch_id);
}

std::unique_ptr<WaiterRegistry::Watch> WaiterRegistry::watch(const DecideRequest& request) {
  std::string name = reservation_key(request);
  auto [it, created] = keys_.try_emplace(name);
  if (created) {
    it->second.watch_id = backend_.watch(
        request, [this, name](const CancelNotice& notice) { on_notice(name, notice); },
        [this, name] { on_confirmed(name); });
  } else if (it->second.watches == 0) {
    std::erase(idle_, name);
  }
  ++it->second.watches;
  return std::make_unique<Watch>(*this, std::move(name), it->second.confirmations);
}

WaiterRegistry::Watch::~Watch() {
  const auto it = registry_.keys_.find(key_);
  if (it == registry_.keys_.end()) return;
  if (waiter_ != nullptr) std::erase(it->second.waiters, waiter_);
  if (--it->second.watches > 0) return;
  // The key's last watch: it stays watched among the most recent idle keys.
  registry_.idle_.push_back(key_);
  if (registry_.idle_.size() <= idle_keys) return;
  const auto oldest = registry_.keys_.find(registry_.idle_.front());
  registry_.idle_.pop_front();
  registry_.backend_.unwatch(oldest->second.watch_id);
  registry_.keys_.erase(oldest);
}

void WaiterRegistry::Watch::add(Waiter* waiter) {
  Key& key = registry_.keys_.at(key_);
  waiter_ = waiter;
  for (const CancelNotice& notice : key.recent)
    apply(*waiter, notice);
  // Why: a subscription confirmed since the watch began, even before the reservation's reply,
  // may have missed notices published after the reservation was made.
  if (key.confirmations != confirmations_) mark_unheard(*waiter);
  key.waiters.push_back(waiter);
}

void WaiterRegistry::wake_all() {
  for (const auto& [name, key] : keys_) {
    for (Waiter* waiter : key.waiters) {
      if (waiter->reschedule != nullptr) waiter->reschedule->request_stop();
    }
  }
}

void WaiterRegistry::on_notice(const std::string& name, const CancelNotice& notice) {
  const auto it = keys_.find(name);
  if (it == keys_.end()) return;
  Key& key = it->second;
  key.recent.push_back(notice);
  if (key.recent.size() > recent_notices) key.recent.pop_front();
  for (Waiter* waiter : key.waiters)
    apply(*waiter, notice);
}

void WaiterRegistry::on_confirmed(const std::string& name) {
  const auto it = keys_.find(name);
  if (it == keys_.end()) return;
  ++it->second.confirmations;
  for (Waiter* waiter : it->second.waiters)
    mark_unheard(*waiter);
}

void WaiterRegistry::mark_unheard(Waiter& waiter) {
  waiter.unheard = true;
  if (waiter.reschedule != nullptr) waiter.reschedule->request_stop();
}

void WaiterRegistry::Watch::locate(const StandingOutcome& where) {
  const auto it = registry_.keys_.find(key_);
  const bool stands = where.standing == ReservationStanding::as_reserved ||
                      where.standing == ReservationStanding::moved;
  if (waiter_ == nullptr || it == registry_.keys_.end() || !stands) return;
  // Why the notices kept are applied again: those heard while the answer was on its way came
  // after what it counts, and moved the waiter from where it stood before the answer.
  Waiter located = *waiter_;
  located.reschedule = nullptr;
  located.slot = where.slot;
  located.heard = where.cancels;
  for (const CancelNotice& notice : it->second.recent)
    apply(located, notice);
  // A notice it heard is no longer kept: the ask at the wake finds where it stands.
  if (located.heard < waiter_->heard) return;
  waiter_->heard = located.heard;
  move_earlier(*waiter_, located.slot);
}

void WaiterRegistry::apply(Waiter& waiter, const CancelNotice& notice) {
  // Only cancellations on the same incarnation of the key that came after this reservation (and
  // after the notices already taken), of a reservation ahead of it.
  if (notice.epoch != waiter.ticket.epoch || notice.cancels <= waiter.heard) return;
  // Why: every returned cancellation is published, numbered; a number skipped is a notice
  // missed (not kept, or lost), which may have moved the waiter.
  if (notice.cancels > waiter.heard + 1) mark_unheard(waiter);
  waiter.heard = notice.cancels;
  if (notice.cancelled >= waiter.ticket.version) return;
  // A shift in another denominator (the policy changed meanwhile) is rounded down.
  const FracTime shift =
      notice.den == waiter.ticket.den ? notice.shift : FracTime{notice.shift.us, 0};
  FracTime moved{waiter.slot.us - shift.us, waiter.slot.frac - shift.frac};
  if (moved.frac < 0) moved = {moved.us - 1, moved.frac + waiter.ticket.den};
  move_earlier(waiter, moved);
}

void WaiterRegistry::move_earlier(Waiter& waiter, FracTime to) {
  if (to.us < waiter.reserved_at_us) to = {waiter.reserved_at_us, 0};
  if (waiter.slot <= to) return;
  // Move the local wake-up by the whole microseconds the slot moved (never earlier than it).
  const std::int64_t earlier_us = waiter.slot.us - to.us - (to.frac > waiter.slot.frac ? 1 : 0);
  waiter.slot = to;
  if (earlier_us <= 0) return;
  waiter.wake -= std::chrono::microseconds(earlier_us);
  if (waiter.reschedule != nullptr) waiter.reschedule->request_stop();
}

}  // namespace redlimit::detail
