#pragma once

#include <uv.h>

#include <array>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "redis/slot_router.hpp"
#include "runtime/background_tasks.hpp"
#include "runtime/completion.hpp"

namespace redlimit::detail {

/// Routes by the slot map of a Redis Cluster: one connection per primary, created on first
/// use; the map is read with CLUSTER SLOTS from any reachable node (known primaries first, then
/// the seeds) on connect(), when the first command is routed, and when something suggests it
/// is stale (at most once per refresh_interval). MOVED updates one slot at once. Until the map
/// is read, commands go to a seed, passing over those that are down.
///
/// Connections to nodes that no longer serve a slot are closed after a refresh, so a dead or
/// demoted node is not reconnected to forever.
class ClusterRouter final : public SlotRouter {
 public:
  /// Refreshes of the slot map start at most this often.
  static constexpr std::chrono::milliseconds refresh_interval{100};

  /// Refreshes in the background, and closes retired connections, as `tasks`' upkeep.
  ClusterRouter(uv_loop_t* loop, BackgroundTasks& tasks, std::vector<Endpoint> seeds,
                ConnectionSettings settings, std::chrono::milliseconds command_timeout,
                std::shared_ptr<spdlog::logger> logger);

  Connection& route(std::optional<std::uint16_t> slot) override;
  bool is_cluster() const noexcept override { return true; }
  const Connection* owner(std::uint16_t slot) const noexcept override {
    return map_known_ ? owner_[slot] : nullptr;
  }
  /// Follows MOVED and ASK (at most max_redirects, with moves off a retired connection), and
  /// pauses before trying again after TRYAGAIN, CLUSTERDOWN, LOADING, MASTERDOWN and READONLY.
  NextTry next_try(const TryOutcome& outcome, std::optional<std::uint16_t> slot,
                   Hops& hops) override;
  bool retired(const Connection& connection) const noexcept override {
    return !connection.accepting() && !closing_;
  }
  void suspect_topology() override;
  Task<void> connect(Clock::time_point deadline) override;
  Task<void> close() override;
  std::vector<Endpoint> subscriber_endpoints() const override { return seeds_; }
  std::exception_ptr config_error() const noexcept override { return config_error_; }

 private:
  /// Where a MOVED or ASK reply sends the command (MOVED also updates the slot map).
  Connection* follow(const Redirect& redirect);
  /// The connection to `address`, created if there is none (with the seeds' credentials).
  Connection& node(const NodeAddress& address);
  /// Where a command goes while the slot map is unread: live_seed(), or the first seed if every
  /// one is known to be down.
  Connection& seed_to_ask();
  /// The connection of the first seed not known to be down (created if there is none), or null.
  Connection* live_seed();
  /// Asks the known primaries, then the seeds, for CLUSTER SLOTS; applies the first answer.
  /// False if no node answered by `deadline`.
  Task<bool> refresh(Clock::time_point deadline);
  /// refresh(), with a ConfigError kept for every later call instead of thrown.
  Task<bool> refresh_noting_errors(Clock::time_point deadline);
  /// Counts a refresh (started with ++refreshes_running_) as ended; the last thing its caller
  /// does with this router, since it may resume close().
  void refresh_finished();
  Task<void> background_refresh();
  void apply(const std::vector<SlotRange>& ranges);
  void retire_unused();

  uv_loop_t* loop_;
  BackgroundTasks& tasks_;
  std::vector<Endpoint> seeds_;
  ConnectionSettings settings_;
  std::chrono::milliseconds command_timeout_;
  std::shared_ptr<spdlog::logger> logger_;
  std::map<std::string, std::unique_ptr<Connection>> nodes_;  ///< by NodeAddress::display()
  /// Closed (or closing) connections of nodes that left the map; freed once closed.
  std::list<std::unique_ptr<Connection>> retired_;
  std::array<Connection*, 16384> owner_{};  ///< per slot; null until known
  bool map_known_ = false;
  int refreshes_running_ = 0;
  bool background_refreshing_ = false;
  bool closing_ = false;
  Clock::time_point last_refresh_{};
  std::unique_ptr<Completion> refreshes_done_;  ///< close() waits on it for running refreshes
  std::exception_ptr config_error_;  ///< a seed is no cluster node: every call fails with it
};

}  // namespace redlimit::detail
