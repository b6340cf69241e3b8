#include "limiter/local_backend.hpp"

#include <algorithm>
#include <chrono>

namespace redlimit::detail {

LocalBackend::LocalBackend(Clock clock) : clock_(std::move(clock)) {}

std::int64_t LocalBackend::system_clock() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void LocalBackend::evict_expired(std::int64_t now) {
  while (!by_expiry_.empty() && by_expiry_.begin()->first <= now) {
    // Why find first: erasing by a reference to the node's own key would read it while erasing.
    entries_.erase(entries_.find(*by_expiry_.begin()->second));
    by_expiry_.erase(by_expiry_.begin());
  }
}

Decision LocalBackend::decide_now(const DecideRequest& request) {
  const std::int64_t now = request.now_us != 0 ? request.now_us : clock_();
  evict_expired(now);
  const auto& limits = request.policy->limits();
  const auto [it, created] = entries_.try_emplace(request.key_base);
  Entry& entry = it->second;
  entry.states.resize(limits.size());
  entry.slots.resize(limits.size());
  // A limit whose state expired, or that now uses another algorithm, starts afresh (in Redis its
  // key would be gone, or be another key).
  for (std::size_t i = 0; i < limits.size(); ++i) {
    if (entry.slots[i].algorithm != limits[i].limit.algorithm || entry.slots[i].expires_us <= now) {
      entry.states[i].reset();
      entry.slots[i] = Slot{limits[i].limit.algorithm, 0};
    }
  }
  const bool write = request.operation == Operation::acquire;
  const PolicyOutcome outcome = decide_policy(request.policy->specs(), entry.states, now,
                                              request.permits, write ? Mode::acquire : Mode::peek);

  if (outcome.allowed && write) {
    std::int64_t entry_expires = 0;
    for (std::size_t i = 0; i < limits.size(); ++i) {
      entry.slots[i].expires_us = now + outcome.limits[i].ttl_us;
      entry_expires = std::max(entry_expires, entry.slots[i].expires_us);
    }
    if (!created) by_expiry_.erase(entry.expiry);
    entry.expiry = by_expiry_.emplace(entry_expires, &it->first);
  } else if (created) {
    entries_.erase(it);  // nothing was stored for this key
  }

  const LimitOutcome& binding = outcome.binding_outcome();
  Decision decision;
  decision.allowed = outcome.allowed;
  decision.limit = binding.limit;
  decision.remaining = binding.remaining;
  decision.retry_after = std::chrono::microseconds(binding.retry_after_us);
  decision.reset_after = std::chrono::microseconds(binding.reset_after_us);
  decision.binding = outcome.binding;
  decision.source = Source::local;
  return decision;
}

Task<Decision> LocalBackend::decide(DecideRequest request) {
  co_return decide_now(request);
}

Task<void> LocalBackend::reset(std::shared_ptr<const CompiledPolicy>, std::string key_base) {
  if (const auto it = entries_.find(key_base); it != entries_.end()) {
    by_expiry_.erase(it->second.expiry);
    entries_.erase(it);
  }
  co_return;
}

}  // namespace redlimit::detail
