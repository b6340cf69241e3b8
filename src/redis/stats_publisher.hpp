#pragma once

#include <uv.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "metrics/instruments.hpp"
#include "redlimit/task.hpp"
#include "runtime/uv_handles.hpp"

namespace redlimit::detail {

class CommandDispatcher;

/// The fields of a name's hash of fleet counts, `<prefix>:stats:{<name>}`, in the order of
/// LimiterMetrics::published.
enum class PublishedCount { allowed, denied, shadow_denied, failure_policy };

/// How long a hash of fleet counts lives after its last write: a name nobody decides on any
/// more disappears.
inline constexpr std::chrono::hours published_counts_ttl{24};

/// Adds a client's decision counts to the fleet's, in Redis, every interval: per limiter name,
/// one call of lua/fleet_counts.lua adds what was decided since the last time (allowed, denied,
/// shadow_denied, failure_policy) and renews the hash's TTL. `redlimit watch` reads them. Counts
/// whose commands fail are not sent again: the fleet's counts are a view for operators, not a
/// record.
class StatsPublisher {
 public:
  StatsPublisher(uv_loop_t* loop, CommandDispatcher& redis, std::chrono::milliseconds interval);
  StatsPublisher(const StatsPublisher&) = delete;
  StatsPublisher& operator=(const StatsPublisher&) = delete;

  /// Publishes `counters` under `key` from now on (`owner` keeps them alive). Adding the same
  /// pair again does nothing. The first call starts the timer: call it on the loop's thread,
  /// once there is something to publish.
  void add(std::string key, std::shared_ptr<Metrics> owner, LimiterMetrics& counters);
  /// Publishes what was decided since the last time, then stops.
  Task<void> close();

 private:
  struct Source {
    std::string key;
    std::shared_ptr<Metrics> owner;
    LimiterMetrics* counters;
  };
  static void on_timer(void* self);
  /// Sends the counts decided since the last publication.
  Task<void> publish();

  uv_loop_t* loop_;
  CommandDispatcher& redis_;
  std::chrono::milliseconds interval_;
  std::vector<Source> sources_;
  // Why made by the first add(): a client without limiters, or whose limiters never decided,
  // opens no handle (and needs no loop iteration to close one).
  std::unique_ptr<Timer> timer_;
  bool publishing_ = false;  ///< a publication is under way (a slow Redis: the next one waits)
  bool closed_ = false;
};

}  // namespace redlimit::detail
