#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "limiter/compiled_policy.hpp"
#include "limiter/key_format.hpp"
#include "redis/command_dispatcher.hpp"
#include "redlimit/policy_store.hpp"

namespace redlimit::detail {

/// What a following limiter decides under: the stored policies of its name, compiled, as last
/// read.
struct FollowedPolicies {
  /// The name's version (its latest change): at least every key's version below.
  std::int64_t version = 0;
  /// The name's policy under the epoch of its change; null when none is stored.
  std::shared_ptr<const CompiledPolicy> policy;
  /// Per raw key whose policy was set by a later change: its override, or the name's policy
  /// under the epoch of the override's removal (each key's decisions carry its epoch's version).
  std::unordered_map<std::string, std::shared_ptr<const CompiledPolicy>, KeyHash, std::equal_to<>>
      per_key;

  /// The policy for `key`: its own, else the name's (null when neither is stored).
  const std::shared_ptr<const CompiledPolicy>& for_key(std::string_view key) const;
};

/// Keeps a limiter's policies current with a PolicyStore: reads the name's record on first use,
/// reads it again within a round trip of each change notice (pub/sub), each time the
/// subscription is confirmed (notices are lost until then and while the pub/sub connection is
/// down), every `refresh` otherwise, and when a script refused a request as stale.
///
/// Shared: reads in flight keep it alive; the notice handler holds it weakly.
class PolicyFollower : public std::enable_shared_from_this<PolicyFollower> {
 public:
  using Clock = std::chrono::steady_clock;

  PolicyFollower(std::shared_ptr<CommandDispatcher> redis, std::string_view prefix,
                 std::string_view name, std::chrono::microseconds refresh);
  ~PolicyFollower();
  PolicyFollower(const PolicyFollower&) = delete;
  PolicyFollower& operator=(const PolicyFollower&) = delete;

  /// The policies to decide under, of at least `min_version`: those read last if they are,
  /// else read now (a call waits for a read in flight rather than starting another), waiting
  /// until `deadline` at most (then TimeoutError). Throws what the read threw (Unavailable, ...)
  /// when there is nothing read to fall back on, or nothing of `min_version` (> 0).
  static Task<std::shared_ptr<const FollowedPolicies>> current(std::shared_ptr<PolicyFollower> self,
                                                               std::int64_t min_version,
                                                               Clock::time_point deadline);
  /// The policies read last if they hold a policy and no read is needed before deciding under
  /// them (a refresh that is due starts in the background), else null: then ask current().
  std::shared_ptr<const FollowedPolicies> ready();
  /// The policies read last, or null before the first read.
  const std::shared_ptr<const FollowedPolicies>& last() const noexcept { return followed_; }

 private:
  /// Reads the record once and installs it; then again if a notice announced a newer version
  /// meanwhile. Wakes the calls waiting for it.
  static Task<void> read(std::shared_ptr<PolicyFollower> self);
  /// Starts read() in the client's background work unless one is in flight (or the client is
  /// closed). Reads never run in a call's frame: a call destroyed meanwhile cannot end them.
  void read_in_background();
  /// Waits until no read is in flight, or until `deadline`. A caller destroyed while waiting is
  /// forgotten, never resumed.
  Task<void> wait_for_read(Clock::time_point deadline);
  /// Reads in the background if `refresh` passed since the last read, or a notice named a newer
  /// version than the one held (followed_ must be set).
  void refresh_if_due();
  void on_notice(std::string_view message);
  /// Reads again after the subscription is confirmed (first, or after a reconnect).
  void on_subscribed();
  void install(const StoredPolicies& stored);

  std::shared_ptr<CommandDispatcher> redis_;
  std::string record_key_;
  std::chrono::microseconds refresh_;
  std::shared_ptr<const FollowedPolicies> followed_;
  Clock::time_point read_at_{};                  ///< when followed_ was read
  std::int64_t announced_version_ = 0;           ///< the largest version a notice or a script named
  bool reading_ = false;                         ///< a read was started and has not ended
  std::vector<std::stop_source*> read_waiters_;  ///< wait_for_read() calls to wake
  std::exception_ptr read_error_;                ///< what the last read threw, if it failed
  bool read_again_ = false;                      ///< the subscription was confirmed during a read
  std::uint64_t subscription_ = 0;
};

}  // namespace redlimit::detail
