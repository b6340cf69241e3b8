#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>

#include "limiter/backend.hpp"

namespace redlimit::detail {

/// The semaphore's rules (lua/semaphore.lua) in process: per key, the leases held, each with its
/// permits and expiry. A permit is free once its lease is released or expired. A key is
/// forgotten once its last lease is released or expired (as the script's key expires with its
/// latest lease), and expired keys are evicted on every call, so memory is bounded by the
/// leases alive.
class LeaseTable {
 public:
  /// Grants the lease if its permits fit at `now` or it already holds them; else says when
  /// enough leases expire for it (expires_or_free_at_us), or, for a voided lease, when it stops
  /// being void.
  LeaseReply grant(const LeaseRequest& request, std::int64_t now);
  /// Extends a lease that has not expired to now + ttl.
  LeaseReply renew(const LeaseRequest& request, std::int64_t now);
  /// Forgets the lease; granted when it still held permits (it had not expired). A lease that
  /// held none is void for its time to live: a grant of it arriving later grants nothing (the
  /// script's `:voided` set).
  LeaseReply release(const LeaseRequest& request, std::int64_t now);
  /// The permits held on `key` at `now`.
  std::int64_t held(std::string_view key, std::int64_t now) const;
  /// Keys that hold leases (or held some that have not been evicted yet).
  std::size_t size() const noexcept { return keys_.size(); }

 private:
  struct Held {
    std::int64_t permits = 0;
    std::int64_t expires_us = 0;
  };
  struct Key {
    std::unordered_map<std::string, Held> leases;
    std::multimap<std::int64_t, std::string>::iterator latest;  ///< in by_latest_expiry_
  };
  using KeyMap = std::unordered_map<std::string, Key>;

  void evict_expired(std::int64_t now);
  /// The key's live leases (expired ones dropped); null if it holds none.
  Key* live(const std::string& key, std::int64_t now);
  /// Re-indexes the key by its latest expiry, or forgets it when it holds no lease.
  void reindex(KeyMap::iterator key);

  KeyMap keys_;
  std::multimap<std::int64_t, std::string> by_latest_expiry_;  ///< latest expiry -> key
  /// Voided leases ("<key>\n<lease id>") -> the end of their time to live.
  std::unordered_map<std::string, std::int64_t> voided_;
  std::multimap<std::int64_t, std::string> voided_by_end_;  ///< end -> voided_'s key
};

}  // namespace redlimit::detail
