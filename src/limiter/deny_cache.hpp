#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "policy/key_format.hpp"
#include "redlimit/limit.hpp"

namespace redlimit::detail {

/// "Redis denied n permits of this key until T": requests for the same key and at least n
/// permits are denied locally until then, without a round trip.
///
/// Why it is exact: a denial is bound to the limit with the longest retry_after, and between
/// the denial and that retry_after the binding limit's key only moves toward "more used" (time
/// passing is what retry_after accounts for), so Redis would deny every such request too, as
/// long as nothing returns capacity to that key; the other limits can only deny more. Only a
/// reset() or a cancelled acquire() reservation returns capacity: the limiter clears the cache
/// on its own reset() and set_policy() (and ignores denials of requests sent before them), and
/// remembers only denials bound by a key that cannot hold reservations (any but a first bucket
/// limit; see cacheable() in policy_enforcer.cpp). T is counted from when the request was sent,
/// so it never ends later than Redis's own retry_after.
class DenyCache {
 public:
  using Clock = std::chrono::steady_clock;

  /// The cached denial for `key_base` and `permits`, if still in force at `now`.
  std::optional<Decision> lookup(std::string_view key_base, std::int64_t permits,
                                 Clock::time_point now);
  /// Remembers Redis's denial of a request sent at `sent`.
  void remember(std::string_view key_base, std::int64_t permits, const Decision& denial,
                Clock::time_point sent);
  void forget(std::string_view key_base);
  void clear() { entries_.clear(); }
  std::size_t size() const noexcept { return entries_.size(); }

 private:
  struct Entry {
    std::int64_t permits;
    Clock::time_point until;
    Decision denial;
  };
  void evict_expired(Clock::time_point now);

  std::unordered_map<std::string, Entry, KeyHash, std::equal_to<>> entries_;
  std::size_t evict_at_ = 1024;  ///< sweep expired entries when the map grows past this
};

}  // namespace redlimit::detail
