#pragma once

#include <cassert>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "policy/compiled_policy.hpp"
#include "policy/key_format.hpp"
#include "redis/command_dispatcher.hpp"
#include "redlimit/policy_store.hpp"

namespace redlimit::detail {

/// The stored policies of a following limiter's name, compiled, as last read.
struct FollowedPolicies {
  std::int64_t version = 0;  ///< the name's (its latest change): at least every key's below
  /// The client's contact() when the read began: after a later break, the server may have
  /// lost what was read.
  std::uint64_t contact = 0;
  std::shared_ptr<const CompiledPolicy> policy;  ///< the name's, under its epoch; null if none
  /// Per raw key whose policy was set by a later change: its override, or the name's policy
  /// under the epoch of the override's removal (each key's decisions carry its epoch's version).
  std::unordered_map<std::string, std::shared_ptr<const CompiledPolicy>, KeyHash, std::equal_to<>>
      per_key;

  /// The policy for `key`: its own, else the name's (null when neither is stored).
  const std::shared_ptr<const CompiledPolicy>& for_key(std::string_view key) const;
};

/// Keeps a limiter's policies current with a PolicyStore: reads the name's record on first use,
/// within a round trip of each change notice (pub/sub), each time the subscription is confirmed
/// (notices are lost until then), every `refresh`, and when a script refused a request as
/// stale. What was read is trusted only while the client keeps its contact with Redis
/// (CommandDispatcher::contact()): after a break, the server may be another one, or one
/// restarted without its data, and the next call reads again before deciding.
///
/// Reads are one at a time; one starts another only when a notice arrived or the subscription
/// was confirmed while it ran. Shared: reads in flight keep it alive; the notice handler holds
/// it weakly.
class PolicyFollower : public std::enable_shared_from_this<PolicyFollower> {
 public:
  using Clock = std::chrono::steady_clock;

  PolicyFollower(std::shared_ptr<CommandDispatcher> redis, std::string_view prefix,
                 std::string_view name, std::chrono::microseconds refresh);
  ~PolicyFollower();
  PolicyFollower(const PolicyFollower&) = delete;
  PolicyFollower& operator=(const PolicyFollower&) = delete;

  /// The policies to decide under, of at least `min_version`: those read last if they are,
  /// else read now (joining a read in flight), by `deadline` (else TimeoutError). Throws what
  /// the read threw (Unavailable, ...) when nothing of `min_version` (> 0), or nothing since
  /// the contact broke, was read. What it returns may still fail verified().
  static Task<std::shared_ptr<const FollowedPolicies>> current(std::shared_ptr<PolicyFollower> self,
                                                               std::int64_t min_version,
                                                               Clock::time_point deadline);
  /// The policies read last if they hold a policy and need no read before deciding (a due
  /// refresh starts in the background), else null: then ask current().
  std::shared_ptr<const FollowedPolicies> ready();
  /// The policies read last, or null before the first read.
  const std::shared_ptr<const FollowedPolicies>& last() const noexcept { return followed_; }
  /// Whether `followed` was read since the client's contact with Redis last broke.
  bool verified(const FollowedPolicies& followed) const noexcept {
    return followed.contact == redis_->contact();
  }
  /// Calls `on_change` each time a read installs another version, where the read ends (inside
  /// hiredis's reply callback, perhaps): it may only schedule work, never resume a coroutine.
  /// One listener at a time (a follower serves one limiter's policy source); an empty function
  /// stops the calls.
  void on_change(std::function<void()> on_change) {
    assert((!on_change || !on_change_) && "a policy follower has one change listener");
    on_change_ = std::move(on_change);
  }
  /// Calls `on_read` with what each read installs (changed or not), where the read ends: for
  /// metrics. A second call replaces the first's.
  void on_read(std::function<void(const FollowedPolicies&)> on_read) {
    on_read_ = std::move(on_read);
  }
  /// Has the store give `key`'s policy a version above `floor`, a version its state was written
  /// under that the store lost, by `deadline`; returns the name's version after it, which
  /// current() then reads.
  static Task<std::int64_t> advance(std::shared_ptr<PolicyFollower> self, std::string key,
                                    std::int64_t floor, Clock::time_point deadline);

 private:
  /// Reads the record and installs it; again if a notice or confirmation came meanwhile. Wakes
  /// the calls waiting for it.
  static Task<void> read(std::shared_ptr<PolicyFollower> self);
  /// Starts read() in the client's background work unless one is in flight (or the client is
  /// closed). Reads never run in a call's frame: a call destroyed meanwhile cannot end them.
  void read_in_background();
  /// Waits until the read in flight ends (true; also when none is), or until `deadline` (false).
  /// Why that read only, not until none is in flight: a read that a notice came during starts
  /// the next as it ends, and while changes keep being announced one follows another without
  /// end. A caller destroyed while waiting is forgotten.
  Task<bool> wait_for_read(Clock::time_point deadline);
  /// Reads again on a change notice.
  void on_notice(std::string_view message);
  /// Reads again after the subscription is confirmed (first, or after a reconnect).
  void on_subscribed();
  /// With a read in flight, sets read_again_ (read() reads again after it if it succeeds);
  /// else reads now if `now`.
  void read_again(bool now);
  /// Compiles `stored` as followed_, read at `contact`; tells on_change of a change.
  void install(const StoredPolicies& stored, std::uint64_t contact);

  std::shared_ptr<CommandDispatcher> redis_;
  std::string record_key_;
  std::chrono::microseconds refresh_;
  std::shared_ptr<const FollowedPolicies> followed_;
  Clock::time_point read_at_{};                  ///< when followed_ was read
  bool reading_ = false;                         ///< a read was started and has not ended
  std::uint64_t reads_ended_ = 0;                ///< reads that ended, successful or not
  std::vector<std::stop_source*> read_waiters_;  ///< wait_for_read() calls to wake
  std::exception_ptr read_error_;                ///< what the last read threw, if it failed
  bool read_again_ = false;                      ///< a notice or confirmation came during the read
  std::uint64_t subscription_ = 0;
  std::function<void()> on_change_;
  std::function<void(const FollowedPolicies&)> on_read_;
};

}  // namespace redlimit::detail
