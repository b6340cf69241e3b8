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
/// permits are denied locally until then, without a round trip. Exact as long as nothing gives
/// capacity back to the binding limit's key (see cacheable() in calls.cpp). T is counted from
/// when the request was sent, so it never ends later than Redis's own retry_after.
class DenyCache {
 public:
  using Clock = std::chrono::steady_clock;

  /// The cached denial for `key_base` and `permits`, if still in force at `now`.
  std::optional<Decision> lookup(std::string_view key_base, std::int64_t permits,
                                 Clock::time_point now);
  /// Remembers Redis's denial of a request sent at `sent`.
  void remember(std::string_view key_base, std::int64_t permits, const Decision& denial,
                Clock::time_point sent);
  /// Forgets the denial of `key_base` (a reset or an adjustment).
  void forget(std::string_view key_base);
  /// Forgets every denial (the policy changed).
  void clear() { entries_.clear(); }

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
