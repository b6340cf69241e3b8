#pragma once
// `sms_dispatcher` (the default command): starts the mock provider (a process), a private
// redis-server unless --redis, --local or --no-limit, and the nodes (processes, or coroutines in
// this process with --local), shows their progress, and reports what the provider saw.

#include <uv.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "dispatch_settings.hpp"
#include "node.hpp"
#include "private_redis.hpp"
#include "progress_display.hpp"
#include "provider_process.hpp"

/// The outcome of a run.
struct DispatchReport {
  std::int64_t sent = 0;
  std::int64_t retried = 0;  ///< failure policy denials and limiter errors, each retried
  ProviderReport provider;
  double seconds = 0;     ///< from starting the nodes to the last answer
  int failed_nodes = 0;   ///< nodes that failed (a process exited non-zero, or lost the provider)
  std::string redis_url;  ///< the Redis the nodes shared (empty: none)
  bool interrupted = false;  ///< stopped early by a signal: node counts are their last reports
};

/// One run of the dispatcher. Use on the loop's thread; keep it alive until run() returns and
/// the loop has closed its handles.
class Launcher {
 public:
  /// `self`: this program's path, to start node processes.
  Launcher(uv_loop_t* loop, DispatchSettings settings, std::string self);

  redlimit::Task<DispatchReport> run();
  /// Stops the run early (on SIGINT or SIGTERM): every child process gets SIGTERM; run() then
  /// ends with what the provider saw until then.
  void interrupt();

 private:
  redlimit::Task<int> start_provider();
  redlimit::Task<int> run_local_nodes(int provider_port);
  redlimit::Task<int> run_node_processes(int provider_port, const std::string& redis_url);
  redlimit::Task<void> show_progress(std::stop_token stop);
  std::vector<NodeProgress> progress() const;

  uv_loop_t* loop_;
  DispatchSettings settings_;
  std::string self_;
  std::unique_ptr<ChildProcess> provider_;
  int provider_port_ = 0;  ///< 0 until the provider says where it listens
  ProviderReport provider_report_;
  bool provider_reported_ = false;
  bool interrupted_ = false;
  std::unique_ptr<PrivateRedis> redis_;
  ProgressDisplay display_;
  std::optional<redlimit::Limiter> local_limiter_;
  std::vector<std::unique_ptr<Node>> local_nodes_;
  std::vector<NodeProgress> reported_;  ///< what each node process last reported
  std::vector<std::unique_ptr<ChildProcess>> processes_;
};
