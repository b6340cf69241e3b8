#pragma once
/// @file run_record.hpp
/// What the chaos driver records about a run besides the workers' logs: the faults it made,
/// the Redis lifetimes, the workers and the samples of connections, memory and descriptors.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace redlimit::chaos {

/// The faults the nemesis makes (REDIS-FAULTS.md says how each is made on one machine).
enum class FaultKind {
  stop,           ///< SIGSTOP redis-server, SIGCONT after the length
  restart,        ///< SIGKILL, down for the length, started again on the same port, empty
  script_flush,   ///< SCRIPT FLUSH (instant)
  pause_write,    ///< CLIENT PAUSE <length> WRITE
  pause_all,      ///< CLIENT PAUSE <length> ALL
  debug_sleep,    ///< DEBUG SLEEP <length>
  oom,            ///< maxmemory just above use, a filler key; then both undone
  maxclients,     ///< maxclients at the current count, the workers' connections killed and their
                  ///< slots filled with raw connections; then undone
  acl_subscribe,  ///< -subscribe taken from the workers' ACL user and its connections killed;
                  ///< then given back
  worker_kill,    ///< one worker told to start burst_calls waiting acquire() calls, SIGKILLed
                  ///< 150 ms later, and replaced by a new worker (the fault ends at the kill)
  // A Sentinel deployment's (replicated_nemesis.hpp). Each ends when the deployment is whole
  // again: a primary the sentinels name, with its replica acknowledging writes.
  failover,       ///< SENTINEL FAILOVER; the old primary then follows the new one
  primary_kill,   ///< SIGKILL the primary; once the sentinels promote the replica, the old
                  ///< primary is started again, empty, as its replica
  replica_stall,  ///< SIGSTOP the replica, SIGCONT after the length
};
/// The faults of the run on one redis-server.
inline constexpr FaultKind single_server_fault_kinds[] = {
    FaultKind::stop,        FaultKind::restart,    FaultKind::script_flush,
    FaultKind::pause_write, FaultKind::pause_all,  FaultKind::debug_sleep,
    FaultKind::oom,         FaultKind::maxclients, FaultKind::acl_subscribe,
    FaultKind::worker_kill};
/// The faults of the run on a primary, its replica and three sentinels.
inline constexpr FaultKind replicated_fault_kinds[] = {
    FaultKind::failover, FaultKind::primary_kill, FaultKind::replica_stall, FaultKind::worker_kill};

std::string_view to_string(FaultKind kind);

/// One fault as made: monotonic times (shared with the workers' logs) and wall times (Redis TIME
/// is the same machine's wall clock).
struct FaultRun {
  FaultKind kind;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  int victim = -1;  ///< worker_kill: the index of the worker killed
};

/// A Redis restart: the wall time of the kill (the old lifetime's decisions are all earlier).
struct Restart {
  std::int64_t kill_wall_us = 0;
};

/// One worker process of the run.
struct WorkerRun {
  std::string log_path;
  pid_t pid = -1;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;  ///< when it exited or was killed
  bool killed = false;      ///< by the nemesis
  int exit_status = -1;     ///< waitpid status, when it exited by itself after SIGTERM
};

/// A sample of INFO stats; own = connections the driver itself had opened by then.
struct ConnectionSample {
  std::int64_t at_ns = 0;
  long long received = 0;
  long long rejected = 0;
  long long own = 0;
};

/// A sample of one worker's resident memory and open descriptors.
struct ProcessSample {
  int worker = 0;
  std::int64_t at_ns = 0;
  long rss_kb = 0;
  int fds = 0;
};

/// Everything the checker reads besides the logs.
struct RunRecord {
  std::uint64_t seed = 0;
  int fleet_size = 0;  ///< workers running at once
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::vector<FaultRun> faults;
  std::vector<Restart> restarts;
  std::vector<WorkerRun> workers;
  std::vector<ConnectionSample> connections;
  std::vector<ProcessSample> processes;
};

}  // namespace redlimit::chaos
