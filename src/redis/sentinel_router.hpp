#pragma once

#include <uv.h>

#include <chrono>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "redis/backoff.hpp"
#include "redis/endpoint_source.hpp"
#include "redis/slot_router.hpp"
#include "redis/subscriber.hpp"
#include "runtime/background_tasks.hpp"
#include "runtime/completion.hpp"

namespace redlimit::detail {

/// Every slot on the primary that Redis Sentinel names (redis-sentinel:// URLs). The primary is
/// found by asking the sentinels in order (SENTINEL get-master-addr-by-name; the first that
/// answers) before the first connection, again whenever a connection to it fails or is lost,
/// and at once when any sentinel announces +switch-master (each is listened to: one that stalls
/// must not hide a switch the others announce). The connections to it (commands and
/// pub/sub) check its ROLE at each connect, and move when it moves (see EndpointSource).
class SentinelRouter final : public SlotRouter, private EndpointSource {
 public:
  /// `settings` are the primary's, `sentinel_settings` the sentinels' (their credentials).
  /// Lookups run as `tasks`' upkeep.
  SentinelRouter(uv_loop_t* loop, BackgroundTasks& tasks, SentinelConfig config,
                 ConnectionSettings settings, ConnectionSettings sentinel_settings,
                 std::chrono::milliseconds command_timeout, std::shared_ptr<spdlog::logger> logger);

  Connection& route(std::optional<std::uint16_t>) override { return *primary_; }
  bool is_cluster() const noexcept override { return false; }
  const Connection* owner(std::uint16_t) const noexcept override { return primary_.get(); }
  /// Pauses before trying again after READONLY (after a failover, the old primary answers it
  /// until the connection has moved, and the command never ran), LOADING, MASTERDOWN and the
  /// like; a failed try looks for the primary again.
  NextTry next_try(const TryOutcome& outcome, std::optional<std::uint16_t> slot,
                   Hops& hops) override;
  /// The primary may have moved (READONLY, a lost connection): look again, and have the
  /// connections check the ROLE of the primary again even if the sentinels still name it.
  void suspect_topology() override;
  Task<void> connect(Clock::time_point deadline) override;
  Task<void> close() override;
  std::vector<Endpoint> subscriber_endpoints() const override { return {config_.primary}; }
  EndpointSource* endpoint_source() noexcept override { return this; }

 private:
  // EndpointSource
  std::optional<Endpoint> current() override;
  void trouble_with(const Endpoint& endpoint) override;
  void watch(Session& session) override;
  void forget(Session& session) override;

  /// Starts a lookup unless one runs (or the router closes); a lookup asked for while one runs
  /// follows it.
  void start_lookup();
  /// Asks the sentinels (at most once per lookup_interval) until one names the primary; while
  /// none does, tells the waiting sessions and asks again after a backoff step.
  Task<void> look_up();
  /// One round: the first answer, in order, that does not name `avoid` (an address that just
  /// failed: a stale sentinel must not pin the client to it), else the first answer; the
  /// sentinel that answered is asked first from then on. Sets `failure` to why none answered.
  Task<std::optional<Endpoint>> ask_sentinels(std::optional<Endpoint> avoid,
                                              std::exception_ptr& failure);
  /// One sentinel's answer: the primary, or nullopt when it does not know it (an error for a
  /// sentinel that fails or refuses).
  Task<std::optional<Endpoint>> ask(Connection& sentinel);
  /// A sentinel's +switch-master announcement: "<name> <old ip> <old port> <new ip> <new port>".
  void on_switch(std::string_view message);
  /// The primary is at `primary`: sessions connected elsewhere move; with `recheck`, the
  /// others reconnect too (and check its ROLE again).
  void found(Endpoint primary, bool recheck);

  uv_loop_t* loop_;
  BackgroundTasks& tasks_;
  SentinelConfig config_;
  ConnectionSettings sentinel_settings_;
  std::chrono::milliseconds command_timeout_;
  std::shared_ptr<spdlog::logger> logger_;
  std::string name_;  ///< "sentinel primary '<master>'", for logs and errors
  std::vector<std::unique_ptr<Connection>> sentinels_;
  /// +switch-master, one subscription per sentinel (made at the first lookup).
  std::vector<std::unique_ptr<Subscriber>> announcements_;
  std::vector<Session*> sessions_;      ///< sessions whose server is the primary
  std::optional<Endpoint> primary_at_;  ///< where the primary was last found
  Backoff backoff_;                     ///< between lookup rounds no sentinel answered
  std::stop_source stop_;               ///< close(): a lookup's backoff sleep ends
  /// Lookups start at most this often: every failed command of every caller suspects the
  /// primary, and one lookup answers them all.
  static constexpr std::chrono::milliseconds lookup_interval{100};
  Clock::time_point last_lookup_{};
  std::optional<Endpoint> troubled_;  ///< an address that failed since the last lookup
  bool recheck_ = false;  ///< READONLY or MASTERDOWN came from the primary: reconnect to check
  std::uint64_t switches_ = 0;  ///< +switch-master announcements taken
  /// The address the last +switch-master moved the primary away from: an answer naming it
  /// comes from a sentinel that has not heard of the switch, and is taken only if no sentinel
  /// names another.
  std::optional<Endpoint> switched_from_;
  bool again_ = false;  ///< a lookup was asked for while one ran
  bool looking_ = false;
  bool closing_ = false;
  Completion lookups_done_;  ///< set when no lookup runs after close() began
  // Why last: its sessions register with this router (watch) as they are made.
  std::unique_ptr<Connection> primary_;
};

}  // namespace redlimit::detail
