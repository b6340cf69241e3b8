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
#include "redis/breaker_scope.hpp"
#include "redis/circuit_breaker.hpp"
#include "redis/command_argv.hpp"
#include "redis/connection.hpp"
#include "redis/held_call.hpp"
#include "redis/replica_ack.hpp"
#include "redis/script_executor.hpp"
#include "redis/script_registry.hpp"
#include "redis/slot_router.hpp"
#include "redis/subscriber.hpp"
#include "redlimit/client.hpp"
#include "redlimit/metrics.hpp"
#include "runtime/background_tasks.hpp"

namespace redlimit::detail {

class TlsContext;

/// The implementation behind Client: sends each command to the server that serves its key
/// (the router says what to do with a redirect or a "not now"), and runs scripts by their SHA1.
class CommandDispatcher final : public ScriptExecutor {
 public:
  /// The thread that runs the loop: the one that built this dispatcher (calls from any other
  /// are refused with UsageError).
  std::thread::id loop_thread() const noexcept { return owner_thread_; }
  using Clock = Connection::Clock;
  /// Makes the decorator a client keeps over its dispatcher (see decorated()).
  using DecoratorFactory = std::unique_ptr<ExecutorDecorator> (*)(CommandDispatcher&);
  /// Whether the reply of one call of `script` with `args` says the call wrote (see
  /// set_write_test()).
  using WriteTest = bool (*)(const scripts::ScriptSource& script,
                             std::span<const std::string_view> args, const Reply& reply);

  CommandDispatcher(uv_loop_t* loop, ClientOptions options);

  Task<void> connect();
  /// Waits for the background work done for callers (background()), closes every connection,
  /// then joins the rest of the background work.
  Task<void> close();
  Task<Reply> command(std::vector<std::string> argv);

  /// Runs a script with EVALSHA, as one command; on NOSCRIPT, sends what the ScriptRegistry
  /// says (EVAL, which also loads it, or EVALSHA once more). An error reply is raised
  /// (ReplyError; ConfigError for permissions, naming the script's commands). `keys` and `args`
  /// must stay valid until the task ends (co_await it at once).
  ///
  /// Script calls are guarded by the circuit breaker of the server that serves the first key
  /// (BreakerScope): while it is open they fail at once with CircuitOpen, and a failure that
  /// leaves it open (Unavailable, or a transient error reply) is raised as CircuitOpen,
  /// carrying when the server will be tried again.
  Task<Reply> eval(const scripts::ScriptSource& script, std::span<const std::string_view> keys,
                   std::span<const std::string_view> args, Clock::time_point deadline) override;
  /// Runs `script` as eval() does, once `holder` lets it go alone (see HeldCall); a call the
  /// holder answers (from a batch) gets that answer, and is neither guarded nor counted here.
  Task<Reply> eval_held(HeldCall::Holder& holder, const scripts::ScriptSource& script,
                        std::span<const std::string_view> keys,
                        std::span<const std::string_view> args, Clock::time_point deadline);
  /// Runs `script` as eval() does, as one command that stands for `calls` calls (a decorator's
  /// batch): counted in RedisMetrics::batch_size as a batch of `calls`, its error not counted
  /// (whoever made the batch counts each call's), and TRYAGAIN and CROSSSLOT raised at once (in
  /// a cluster, the batch's keys split between the two nodes of a migrating slot: its calls
  /// alone would follow ASK). For a batch `across_slots` (keys of several slots, some not
  /// declared), MOVED and ASK too, rather than followed: the node a redirect names need not
  /// serve the batch's other slots, and after ASKING it would serve keys of every slot it
  /// imports, which the source may still hold.
  ///
  /// With ClientOptions::replicas, a batch Redis answered puts the WAIT that followed it in
  /// `ack`, for whoever made the batch to confirm (if a call of it wrote) or skip; the batch
  /// counts in the circuit breaker once that is done.
  Task<Reply> eval_batch(const scripts::ScriptSource& script,
                         std::span<const std::string_view> keys,
                         std::span<const std::string_view> args, Clock::time_point deadline,
                         std::size_t calls, bool across_slots, std::optional<ReplicaAck>& ack);
  /// Runs an embedded script for the client's own bookkeeping (the fleet's counts), as eval()
  /// does but never coalesced, not guarded by a circuit breaker, and without counting its
  /// error in RedisMetrics: it is nobody's call, and an operator's alerts are about calls.
  Task<Reply> eval_own(const scripts::ScriptSource& script, std::span<const std::string_view> keys,
                       std::span<const std::string_view> args, Clock::time_point deadline);

  /// Tells how to read from a script call's reply whether the call wrote (the application knows
  /// its scripts' replies; the transport names no script): with ClientOptions::replicas, a
  /// call whose reply says it wrote is answered once the replicas hold it, others at once.
  /// Until set, every call counts as one that wrote.
  void set_write_test(WriteTest test) noexcept { write_test_ = test; }
  /// Whether the call of `script` with `args` that got `reply` wrote (see set_write_test()).
  bool wrote(const scripts::ScriptSource& script, std::span<const std::string_view> args,
             const Reply& reply) const {
    return write_test_ == nullptr || write_test_(script, args, reply);
  }

  /// `reply`, or the exception its error reply becomes (naming the commands of `script`, if
  /// any): how a script call's answer is raised, also when a batch carried it.
  Reply answer(Reply reply, const scripts::ScriptSource* script) const;

  /// The executor this client's limiters and semaphores send script calls through when they
  /// decorate it: the decorator `make` builds at the first call, kept and shared from then on
  /// (a later call returns it, whatever its `make`); close() closes it before the connections.
  /// This dispatcher itself once close() began with no decorator made.
  ScriptExecutor& decorated(DecoratorFactory make);

  /// The deadline of a command issued now.
  Clock::time_point command_deadline() const noexcept {
    return Clock::now() + options_.command_timeout;
  }
  uv_loop_t* loop() const noexcept { return loop_; }
  const ClientOptions& options() const noexcept { return options_; }
  const std::shared_ptr<spdlog::logger>& logger() const noexcept { return options_.logger; }
  /// Where this client counts (ClientOptions::metrics, or its own).
  const std::shared_ptr<Metrics>& metrics() const noexcept { return options_.metrics; }
  /// The Redis part of metrics().
  RedisMetrics& redis_metrics() noexcept { return redis_metrics_; }
  SlotRouter& router() noexcept { return *router_; }
  /// Whether the keys of one script call must share a hash slot (a cluster).
  bool is_cluster() const noexcept { return router_->is_cluster(); }
  /// The slot to route `key` by: its hash slot in a cluster, none (any) on one server.
  std::optional<std::uint16_t> slot_of(std::string_view key) const noexcept;
  /// The scope of every task the library starts for this client: close() waits for the work
  /// done for callers (lease releases, refunds) before closing the connections, and joins the
  /// rest last.
  BackgroundTasks& background() noexcept { return background_; }
  /// The pub/sub connection, created on first use.
  Subscriber& subscriber();
  /// Whether close() was called: nothing new (a subscription included) should start.
  bool closed() const noexcept { return close_requested_; }
  /// What calling a script by its SHA1 needs.
  const ScriptRegistry& scripts() const noexcept { return scripts_; }
  /// Throws UsageError when called from a thread other than the one that made the client.
  void check_thread() const;
  /// Changes each time a ready connection of this client ends (lost, moved, dropped): what was
  /// read before (a follower's stored policies) may come from a server that is gone, or that
  /// restarted without its data.
  std::uint64_t contact() const noexcept { return contact_breaks_; }

 private:
  /// How execute() treats a command.
  struct Terms {
    bool guarded;            ///< a script call of a limiter or semaphore: a BreakerScope around it
    bool counts_error;       ///< its error counts in RedisMetrics::errors
    bool answers_try_again;  ///< TRYAGAIN, CROSSSLOT raised at once, not retried (a batch)
    bool answers_redirects;  ///< MOVED, ASK raised at once, not followed (a batch across slots)
  };
  static constexpr Terms plain_command{.guarded = false,
                                       .counts_error = true,
                                       .answers_try_again = false,
                                       .answers_redirects = false};
  static constexpr Terms application_call{.guarded = true,
                                          .counts_error = true,
                                          .answers_try_again = false,
                                          .answers_redirects = false};
  static constexpr Terms batch_call{.guarded = true,
                                    .counts_error = false,
                                    .answers_try_again = true,
                                    .answers_redirects = false};
  static constexpr Terms batch_across_slots_call{
      .guarded = true, .counts_error = false, .answers_try_again = true, .answers_redirects = true};
  /// eval_own(): nobody's call, so neither guarded nor counted.
  static constexpr Terms own_call{.guarded = false,
                                  .counts_error = false,
                                  .answers_try_again = false,
                                  .answers_redirects = false};
  /// Whether a command of `terms` raises `reply` at once (see Terms).
  static bool answers_at_once(const Terms& terms, const Reply& reply);

  /// What eval_held() adds to execute(): who holds the call first, and its keys and arguments.
  struct Hold {
    HeldCall::Holder* holder;  ///< none for a call that nobody holds
    std::span<const std::string_view> keys;
    std::span<const std::string_view> args;
  };

  /// eval() (`holder` null) and eval_held().
  Task<Reply> eval_holding(HeldCall::Holder* holder, const scripts::ScriptSource& script,
                           std::span<const std::string_view> keys,
                           std::span<const std::string_view> args, Clock::time_point deadline);
  /// With a `hold`, first waits for its holder, and returns what it answered unless it lets
  /// the call go alone. Sends `argv` to the node serving `slot` until the router says the outcome
  /// is the answer (a redirect followed, a "not now" retried while the deadline allows). With
  /// `script`, argv is an EVALSHA of it and NOSCRIPT is answered on the node that said it. An error
  /// reply is raised, as by answer(). Guarded commands count as a batch of `calls` in batch_size.
  /// With ClientOptions::replicas, a guarded script call is covered by a WAIT (ReplicaWaits): a
  /// call that wrote is answered once its replicas hold it; with an `ack`, the WAIT is handed
  /// there instead (eval_batch()).
  Task<Reply> execute(std::optional<std::uint16_t> slot, CommandArgv argv,
                      const scripts::ScriptSource* script, Clock::time_point deadline, Terms terms,
                      std::size_t calls = 1, Hold hold = {},
                      std::optional<ReplicaAck>* ack = nullptr);
  /// The WAITs of `connection`, made at first use.
  ReplicaWaits& replica_waits(Connection& connection);
  /// What to send first on `target`: `argv`, or for a script not loaded there its EVAL (the
  /// words put in `reload`).
  std::span<const std::string_view> first_send(Connection& target,
                                               const scripts::ScriptSource* script,
                                               const CommandArgv& argv,
                                               std::vector<std::string_view>& reload) const;
  /// Whether `result`, the answer on `target` to a call of `script` after `reloads` reloads,
  /// asks for another (NOSCRIPT, at most twice, and not on a retired connection).
  bool reloads_after(const scripts::ScriptSource* script, const CommandResult& result, int reloads,
                     const Connection& target) const;
  /// Throws the exception an error reply becomes (see exception_from_error).
  [[noreturn]] void raise(const std::string& error, std::string_view hint) const;
  /// The breaker scope of a call to `server`'s Redis server (one breaker per server: per
  /// primary in a cluster); throws CircuitOpen when the breaker refuses it.
  BreakerScope guard(Connection& server);
  /// `argv` on `connection` right after ASKING (an error reply to ASKING is the result); a
  /// `follow_up` as in Connection::send. With a `round`, the WAIT that covers `argv` is put
  /// there (ReplicaWaits::cover()).
  Task<CommandResult> send_asking(Connection& connection, std::span<const std::string_view> argv,
                                  Clock::time_point deadline, bool follow_up,
                                  std::shared_ptr<WaitRound>* round);

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
  std::unique_ptr<ExecutorDecorator> decorator_;  ///< null until decorated() makes it
  WriteTest write_test_ = nullptr;                ///< see set_write_test()
  bool close_requested_ = false;
  Completion closed_;  ///< a second close() waits for the first
};

}  // namespace redlimit::detail
