#pragma once

#include <uv.h>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "metrics/instruments.hpp"
#include "redis/circuit_breaker.hpp"
#include "redis/command_argv.hpp"
#include "redis/connection.hpp"
#include "redis/script_batcher.hpp"
#include "redis/script_registry.hpp"
#include "redis/slot_router.hpp"
#include "redis/subscriber.hpp"
#include "redlimit/client.hpp"
#include "redlimit/metrics.hpp"
#include "runtime/background_tasks.hpp"

namespace redlimit::detail {

class TlsContext;

/// The implementation behind Client: sends each command to the server that serves its key,
/// follows the cluster's redirects and retries, and runs the embedded scripts.
class CommandDispatcher {
 public:
  /// The thread that runs the loop: the one that built this dispatcher (calls from any other
  /// are refused with UsageError).
  std::thread::id loop_thread() const noexcept { return owner_thread_; }
  using Clock = Connection::Clock;

  CommandDispatcher(uv_loop_t* loop, ClientOptions options);

  Task<void> connect();
  /// Waits for the background work done for callers (background()), closes every connection,
  /// then joins the rest of the background work.
  Task<void> close();
  Task<Reply> command(std::vector<std::string> argv);

  /// Most redirects one call follows (MOVED and ASK together).
  static constexpr int max_redirects = 5;

  /// Runs an embedded script with EVALSHA; on NOSCRIPT, sends what the ScriptRegistry says (EVAL,
  /// which also loads it, or EVALSHA once more). An error reply is raised (ReplyError;
  /// ConfigError for permissions, naming the script's commands). `keys` and `args` must stay
  /// valid until the task ends (co_await it at once).
  ///
  /// Script calls are guarded by the circuit breaker of the server that serves the first key:
  /// while it is open they fail at once with CircuitOpen, and a failure that leaves it open
  /// (Unavailable, or a transient error reply) is raised as CircuitOpen, carrying when the
  /// server will be tried again.
  ///
  /// Calls of the scripts the batch script holds are coalesced (ScriptBatcher) unless
  /// ClientOptions::max_batch is 1.
  Task<Reply> eval(const scripts::ScriptSource& script, std::span<const std::string_view> keys,
                   std::span<const std::string_view> args, Clock::time_point deadline);
  /// Runs an embedded script for the client's own bookkeeping (the fleet's counts), as eval()
  /// does but never coalesced, not guarded by a circuit breaker, and without counting its
  /// error in RedisMetrics: it is nobody's call, and an operator's alerts are about calls.
  Task<Reply> eval_own(const scripts::ScriptSource& script, std::span<const std::string_view> keys,
                       std::span<const std::string_view> args, Clock::time_point deadline);

  /// The deadline of a command issued now.
  Clock::time_point command_deadline() const noexcept {
    return Clock::now() + options_.command_timeout;
  }
  uv_loop_t* loop() const noexcept { return loop_; }
  const ClientOptions& options() const noexcept { return options_; }
  const std::shared_ptr<spdlog::logger>& logger() const noexcept { return options_.logger; }
  /// Where this client counts (ClientOptions::metrics, or its own).
  const std::shared_ptr<Metrics>& metrics() const noexcept { return options_.metrics; }
  SlotRouter& router() noexcept { return *router_; }
  /// Whether the keys of one script call must share a hash slot (a cluster).
  bool is_cluster() const noexcept { return router_->is_cluster(); }
  /// The scope of every task the library starts for this client: close() waits for the work
  /// done for callers (lease releases, refunds) before closing the connections, and joins the
  /// rest last.
  BackgroundTasks& background() noexcept { return background_; }
  /// The pub/sub connection, created on first use.
  Subscriber& subscriber();
  /// Whether close() was called: nothing new (a subscription included) should start.
  bool closed() const noexcept { return close_requested_; }
  /// The embedded scripts.
  const ScriptRegistry& scripts() const noexcept { return scripts_; }
  /// Throws UsageError when called from a thread other than the one that made the client.
  void check_thread() const;
  /// Changes each time a ready connection of this client ends (lost, moved, dropped): what was
  /// read before (a follower's stored policies) may come from a server that is gone, or that
  /// restarted without its data.
  std::uint64_t contact() const noexcept { return contact_breaks_; }

 private:
  friend class ScriptBatcher;  // sends batches with execute(), answers their calls with answer()
  /// eval() through the batcher: queued, then answered from a batch or sent alone.
  Task<Reply> eval_coalesced(std::optional<std::uint16_t> slot, const scripts::ScriptSource& script,
                             std::span<const std::string_view> keys,
                             std::span<const std::string_view> args, Clock::time_point deadline);
  /// What execute() does with TRYAGAIN.
  enum class OnTryAgain {
    retry,   ///< backs off and retries while the deadline allows
    answer,  ///< raises it at once (a batch, whose calls alone would not meet it)
  };
  /// Whose script call execute() sends.
  enum class Caller {
    application,  ///< a limiter's or a semaphore's: guarded by the breaker, counted
    client,       ///< the client's own (eval_own()): neither
  };
  /// Sends `argv` to the node serving `slot` and follows the cluster's answers: MOVED and ASK
  /// (at most max_redirects), TRYAGAIN (as `on_try_again` says), CLUSTERDOWN, LOADING and
  /// MASTERDOWN (backs off and retries while the deadline allows). With `script`, argv is an
  /// EVALSHA of it and NOSCRIPT is answered on the node that said it. An error reply is raised,
  /// as by answer().
  ///
  /// Counts in RedisMetrics: a script call the breaker lets through as one batch of `calls`
  /// calls; the error raised, unless the command is a batch (whose calls the batcher counts,
  /// each once). A script call of the Caller::client is neither guarded nor counted.
  Task<Reply> execute(std::optional<std::uint16_t> slot, CommandArgv argv,
                      const scripts::ScriptSource* script, Clock::time_point deadline,
                      OnTryAgain on_try_again = OnTryAgain::retry, std::size_t calls = 1,
                      Caller caller = Caller::application);
  /// The reply of `result`, or the exception its error reply becomes (naming the commands of
  /// `script`, if any).
  Reply answer(CommandResult& result, const scripts::ScriptSource* script) const;
  /// The slot to route `key` by: its hash slot in a cluster, none (any) on one server.
  std::optional<std::uint16_t> slot_of(std::string_view key) const noexcept;
  /// Throws the exception an error reply becomes (see exception_from_error).
  [[noreturn]] void raise(const std::string& error, std::string_view hint) const;
  /// The breaker of `server`'s Redis server (one per server: per primary in a cluster).
  CircuitBreaker& breaker_of(Connection& server);
  /// The server `breaker` belongs to (a search: for logs and errors only).
  // Why not the connection's name: the connection may be gone by the time a call ends (its
  // node left the slot map), the breaker stays.
  const std::string& server_of(const CircuitBreaker& breaker) const;
  /// Records the outcome of a script call in `breaker`: a failure (`failure`, or a transient
  /// error `reply`) that leaves it open becomes CircuitOpen in `failure`.
  void record_outcome(CircuitBreaker& breaker, std::exception_ptr& failure, const Reply& reply);
  /// `argv` on `connection` right after ASKING (an error reply to ASKING is the result); a
  /// `follow_up` as in Connection::send.
  Task<CommandResult> send_asking(Connection& connection, std::span<const std::string_view> argv,
                                  Clock::time_point deadline, bool follow_up);

  uv_loop_t* loop_;
  ClientOptions options_;
  RedisMetrics& redis_metrics_ = options_.metrics->redis();
  std::thread::id owner_thread_ = std::this_thread::get_id();
  /// Per server, by Connection::name(): a server keeps its breaker when its connection is
  /// replaced (a node that left the slot map and came back). Why before router_: connections
  /// point at their breaker, so the breakers outlive them.
  std::unordered_map<std::string, CircuitBreaker> breakers_;
  ScriptRegistry scripts_{&redis_metrics_};
  /// The TLS configuration of a rediss:// URL (null otherwise), shared by its connections.
  std::shared_ptr<TlsContext> tls_;
  std::uint64_t contact_breaks_ = 0;  ///< see contact(); counted by every connection's session
  /// Why before router_: the router starts its upkeep here, so it is made first and goes last.
  BackgroundTasks background_{loop_};
  std::unique_ptr<SlotRouter> router_;  ///< after options_, breakers_ and tls_: made from them
  std::unique_ptr<Subscriber> subscriber_;
  std::unique_ptr<ScriptBatcher> batcher_;  ///< null when max_batch is 1
  bool close_requested_ = false;
  bool closing_ = false;  ///< the connections are closing
  Completion closed_;     ///< a second close() waits for the first
};

}  // namespace redlimit::detail
