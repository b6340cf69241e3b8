#include "limiter/deny_cache.hpp"

namespace redlimit::detail {

std::optional<Decision> DenyCache::lookup(std::string_view key_base, std::int64_t permits,
                                          Clock::time_point now) {
  const auto it = entries_.find(key_base);
  if (it == entries_.end()) return std::nullopt;
  if (it->second.until <= now) {
    entries_.erase(it);
    return std::nullopt;
  }
  if (permits < it->second.permits) return std::nullopt;
  Decision decision = it->second.denial;
  decision.retry_after = std::chrono::ceil<std::chrono::microseconds>(it->second.until - now);
  decision.server_time_us = 0;
  decision.source = Source::deny_cache;
  return decision;
}

void DenyCache::remember(std::string_view key_base, std::int64_t permits, const Decision& denial,
                         Clock::time_point sent) {
  const auto until = sent + denial.retry_after;
  const auto it = entries_.find(key_base);
  // Keep the entry that covers more: fewer permits, or the same permits for longer.
  if (it != entries_.end() && it->second.until > sent &&
      (it->second.permits < permits ||
       (it->second.permits == permits && it->second.until >= until))) {
    return;
  }
  if (it != entries_.end()) {
    it->second = Entry{permits, until, denial};
  } else {
    entries_.emplace(key_base, Entry{permits, until, denial});
  }
  if (entries_.size() > evict_at_) evict_expired(sent);
}

void DenyCache::forget(std::string_view key_base) {
  if (const auto it = entries_.find(key_base); it != entries_.end()) entries_.erase(it);
}

void DenyCache::evict_expired(Clock::time_point now) {
  std::erase_if(entries_, [now](const auto& entry) { return entry.second.until <= now; });
  evict_at_ = std::max<std::size_t>(1024, 2 * entries_.size());
}

}  // namespace redlimit::detail
