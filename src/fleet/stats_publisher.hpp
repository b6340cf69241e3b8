#pragma once

#include <uv.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "redlimit/task.hpp"
#include "runtime/completion.hpp"
#include "runtime/uv_handles.hpp"

namespace redlimit::detail {

class CommandDispatcher;

/// The decisions of one client's limiters of one prefix and name, by FleetCount, and how much
/// of them was added to the fleet's counts so far. Used on the client's loop thread only.
struct FleetTally {
  std::array<std::uint64_t, 4> decided{};
  std::array<std::uint64_t, 4> published{};
};

/// Adds a client's decision counts to the fleet's, in Redis, every interval: per limiter name,
/// one call of lua/fleet_counts.lua adds what was decided since the last time (allowed, denied,
/// shadow_denied, failure_policy; fleet/fleet_schema.hpp) and renews the hash's TTL; then one
/// call of lua/fleet_names.lua records the names it published under each prefix.
/// read_fleet_counts() and `redlimit watch` read them. Counts whose commands fail are not sent
/// again: the fleet's counts are a view for operators, not a record.
class StatsPublisher {
 public:
  /// Publishes through `redis`, which it keeps alive, every `interval`.
  StatsPublisher(std::shared_ptr<CommandDispatcher> redis, std::chrono::milliseconds interval);
  StatsPublisher(const StatsPublisher&) = delete;
  StatsPublisher& operator=(const StatsPublisher&) = delete;

  /// The tally of this client's limiters `name` under `prefix`, published from now on: the
  /// same for every limiter of that prefix and name that holds it. Once none holds it and its
  /// counts are sent, it is forgotten. Why per client and prefix, not the name's
  /// LimiterMetrics: those are the process's, which may have limiters of the name under other
  /// prefixes or on clients of other servers. The first call starts the timer: call it on the
  /// loop's thread, once there is something to publish.
  std::shared_ptr<FleetTally> add(std::string prefix, std::string name);
  /// The tallies it keeps: those of live limiters, and of gone ones until their counts are sent.
  std::size_t tallies() const noexcept { return sources_.size(); }
  /// Waits for a publication under way, publishes what was decided since, then stops.
  Task<void> close();

 private:
  struct Source {
    std::string prefix;
    std::string name;
    /// Why shared: its limiters hold it, and a publication under way keeps it alive, past a
    /// client destroyed unclosed.
    std::shared_ptr<FleetTally> tally;
  };
  /// What a publication shares with its publisher. Why shared: a client destroyed without
  /// close() destroys the publisher while a publication still awaits Redis.
  struct Shared {
    std::shared_ptr<CommandDispatcher> redis;
    bool failing = false;  ///< the last command failed (its failure was logged)
    /// While a publication is under way: set when it ends (close() waits for it).
    std::unique_ptr<Completion> publishing{};
  };
  using Clock = std::chrono::steady_clock;
  static void on_timer(void* self);
  /// Forgets the tallies that only this publisher holds and that have nothing left to send.
  void forget_unheld();
  /// publish(), under way in `shared` until it ends.
  static Task<void> publish_marked(std::shared_ptr<Shared> shared, std::vector<Source> sources);
  /// Sends the counts of `sources` decided since the last publication.
  static Task<void> publish(std::shared_ptr<Shared> shared, std::vector<Source> sources);
  /// Sends the counts of `source` that grew since the last publication, by `deadline`; sets
  /// `*sent` when Redis took some.
  static Task<void> publish_counts(Shared& shared, Source source, Clock::time_point deadline,
                                   char* sent);
  /// Records `names` as published under `prefix`, by `deadline`.
  static Task<void> publish_names(Shared& shared, std::string prefix,
                                  std::vector<std::string> names, Clock::time_point deadline);
  /// Logs the first failure after a success (an ACL without HINCRBY fails every interval).
  static void failed(Shared& shared, const std::exception_ptr& error);

  uv_loop_t* loop_;
  std::shared_ptr<Shared> shared_;
  std::chrono::milliseconds interval_;
  // Why copied for each publication: add() may append to it while its sends are awaited.
  std::vector<Source> sources_;
  // Why made by the first add(): a client without limiters, or whose limiters never decided,
  // opens no handle (and needs no loop iteration to close one).
  std::unique_ptr<Timer> timer_;
  bool closing_ = false;
  Completion closed_;  ///< close() ended (a second close() waits for it)
};

}  // namespace redlimit::detail
