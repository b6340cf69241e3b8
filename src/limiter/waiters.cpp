#include "limiter/waiters.hpp"

#include <algorithm>

namespace redlimit::detail {
namespace {

constexpr std::size_t recent_notices = 64;

}  // namespace

WaiterRegistry::~WaiterRegistry() {
  for (const auto& [key_base, key] : keys_)
    backend_.unwatch(key.watch_id);
}

WaiterRegistry::Watch WaiterRegistry::watch(const DecideRequest& request) {
  auto [it, created] = keys_.try_emplace(request.key_base);
  if (created) {
    it->second.watch_id =
        backend_.watch(request, [this, key_base = request.key_base](const CancelNotice& notice) {
          on_notice(key_base, notice);
        });
  }
  ++it->second.watches;
  return Watch(*this, request.key_base);
}

WaiterRegistry::Watch::Watch(WaiterRegistry& registry, std::string key_base)
    : registry_(registry), key_base_(std::move(key_base)) {}

WaiterRegistry::Watch::~Watch() {
  const auto it = registry_.keys_.find(key_base_);
  if (it == registry_.keys_.end()) return;
  if (waiter_ != nullptr) std::erase(it->second.waiters, waiter_);
  if (--it->second.watches == 0) {
    registry_.backend_.unwatch(it->second.watch_id);
    registry_.keys_.erase(it);
  }
}

void WaiterRegistry::Watch::add(Waiter* waiter) {
  Key& key = registry_.keys_.at(key_base_);
  waiter_ = waiter;
  for (const CancelNotice& notice : key.recent)
    apply(*waiter, notice);
  key.waiters.push_back(waiter);
}

void WaiterRegistry::on_notice(const std::string& key_base, const CancelNotice& notice) {
  const auto it = keys_.find(key_base);
  if (it == keys_.end()) return;
  Key& key = it->second;
  key.recent.push_back(notice);
  if (key.recent.size() > recent_notices) key.recent.pop_front();
  for (Waiter* waiter : key.waiters)
    apply(*waiter, notice);
}

void WaiterRegistry::apply(Waiter& waiter, const CancelNotice& notice) {
  // Only cancellations that came after this reservation (in the key's versions, and in server
  // time, in case the versions restarted with the key) of a reservation ahead of it.
  if (notice.version <= waiter.seen || notice.now_us < waiter.reserved_at_us ||
      notice.cancelled >= waiter.version) {
    return;
  }
  waiter.seen = notice.version;
  // A shift in another denominator (the policy changed meanwhile) is rounded down.
  const FracTime shift = notice.den == waiter.den ? notice.shift : FracTime{notice.shift.us, 0};
  FracTime moved{waiter.slot.us - shift.us, waiter.slot.frac - shift.frac};
  if (moved.frac < 0) moved = {moved.us - 1, moved.frac + waiter.den};
  if (moved.us < waiter.reserved_at_us) moved = {waiter.reserved_at_us, 0};
  // Move the local wake-up by the whole microseconds the slot moved (never earlier than it).
  const std::int64_t earlier_us =
      waiter.slot.us - moved.us - (moved.frac > waiter.slot.frac ? 1 : 0);
  waiter.slot = moved;
  if (earlier_us <= 0) return;
  waiter.wake -= std::chrono::microseconds(earlier_us);
  if (waiter.reschedule != nullptr) waiter.reschedule->request_stop();
}

}  // namespace redlimit::detail
