#include "limiter/semaphore_leases.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace redlimit::detail {

namespace {

std::string voided_key(const LeaseRequest& request) {
  return request.key + '\n' + request.lease_id;
}

}  // namespace

void LeaseTable::evict_expired(std::int64_t now) {
  while (!by_latest_expiry_.empty() && by_latest_expiry_.begin()->first <= now) {
    keys_.erase(by_latest_expiry_.begin()->second);
    by_latest_expiry_.erase(by_latest_expiry_.begin());
  }
  while (!voided_by_end_.empty() && voided_by_end_.begin()->first <= now) {
    const auto found = voided_.find(voided_by_end_.begin()->second);
    if (found != voided_.end() && found->second <= now) voided_.erase(found);
    voided_by_end_.erase(voided_by_end_.begin());
  }
}

LeaseTable::Key* LeaseTable::live(const std::string& key, std::int64_t now) {
  evict_expired(now);
  const auto found = keys_.find(key);
  if (found == keys_.end()) return nullptr;
  std::erase_if(found->second.leases,
                [now](const auto& lease) { return lease.second.expires_us <= now; });
  return &found->second;
}

void LeaseTable::reindex(KeyMap::iterator key) {
  by_latest_expiry_.erase(key->second.latest);
  if (key->second.leases.empty()) {
    keys_.erase(key);
    return;
  }
  std::int64_t latest = 0;
  for (const auto& lease : key->second.leases)
    latest = std::max(latest, lease.second.expires_us);
  key->second.latest = by_latest_expiry_.emplace(latest, key->first);
}

LeaseReply LeaseTable::grant(const LeaseRequest& request, std::int64_t now) {
  Key* key = live(request.key, now);
  if (const auto voided = voided_.find(voided_key(request)); voided != voided_.end()) {
    return {.granted = false, .now_us = now, .expires_or_free_at_us = voided->second};
  }
  std::int64_t held = 0;
  if (key != nullptr) {
    if (const auto existing = key->leases.find(request.lease_id); existing != key->leases.end()) {
      return {.granted = true, .now_us = now, .expires_or_free_at_us = existing->second.expires_us};
    }
    for (const auto& lease : key->leases)
      held += lease.second.permits;
  }
  if (held + request.permits > request.capacity) {
    // The earliest expiry by which `must_expire` permits have gone, leases in expiry order.
    std::vector<Held> by_expiry;
    if (key != nullptr) {
      for (const auto& lease : key->leases)
        by_expiry.push_back(lease.second);
    }
    std::sort(by_expiry.begin(), by_expiry.end(),
              [](const Held& a, const Held& b) { return a.expires_us < b.expires_us; });
    std::int64_t must_expire = held + request.permits - request.capacity;
    std::int64_t free_at = now;
    for (const Held& lease : by_expiry) {
      free_at = lease.expires_us;
      must_expire -= lease.permits;
      if (must_expire <= 0) break;
    }
    return {.granted = false, .now_us = now, .expires_or_free_at_us = free_at};
  }
  auto entry = keys_.find(request.key);
  if (entry == keys_.end()) {
    entry = keys_.emplace(request.key, Key{}).first;
    entry->second.latest = by_latest_expiry_.emplace(now, request.key);
  }
  const std::int64_t expiry = now + request.ttl_us;
  entry->second.leases.emplace(request.lease_id, Held{request.permits, expiry});
  reindex(entry);
  return {.granted = true, .now_us = now, .expires_or_free_at_us = expiry};
}

LeaseReply LeaseTable::renew(const LeaseRequest& request, std::int64_t now) {
  const LeaseReply refused{.granted = false, .now_us = now, .expires_or_free_at_us = 0};
  Key* key = live(request.key, now);
  if (key == nullptr) return refused;
  const auto existing = key->leases.find(request.lease_id);
  if (existing == key->leases.end()) return refused;
  existing->second.expires_us = now + request.ttl_us;
  reindex(keys_.find(request.key));
  return {.granted = true, .now_us = now, .expires_or_free_at_us = now + request.ttl_us};
}

LeaseReply LeaseTable::release(const LeaseRequest& request, std::int64_t now) {
  Key* key = live(request.key, now);
  if (key == nullptr || key->leases.erase(request.lease_id) == 0) {
    const std::int64_t end = now + request.ttl_us;
    voided_[voided_key(request)] = end;
    voided_by_end_.emplace(end, voided_key(request));
    return {.granted = false, .now_us = now};
  }
  reindex(keys_.find(request.key));
  return {.granted = true, .now_us = now};
}

std::int64_t LeaseTable::held(std::string_view key, std::int64_t now) const {
  const auto found = keys_.find(std::string(key));
  if (found == keys_.end()) return 0;
  std::int64_t permits = 0;
  for (const auto& lease : found->second.leases) {
    if (lease.second.expires_us > now) permits += lease.second.permits;
  }
  return permits;
}

}  // namespace redlimit::detail
