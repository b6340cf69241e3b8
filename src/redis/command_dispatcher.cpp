#include "redis/command_dispatcher.hpp"

#include <algorithm>
#include <cstdio>
#include <random>
#include <stdexcept>

#include "redis/cluster_router.hpp"
#include "redis/command_keys.hpp"
#include "redis/endpoint.hpp"
#include "redis/error_count.hpp"
#include "redis/key_slot.hpp"
#include "redis/reply_convert.hpp"
#include "redis/sentinel_router.hpp"
#include "redis/tls_context.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "runtime/failed_task.hpp"
#include "runtime/logger.hpp"

namespace redlimit::detail {
namespace {

constexpr std::string_view client_id_characters =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-";

/// 16 random hex digits: a Client's id when its options name none.
std::string random_client_id() {
  std::random_device entropy;
  const std::uint64_t value = (std::uint64_t{entropy()} << 32) ^ entropy();
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

ClientOptions validated(ClientOptions options) {
  auto positive = [](std::chrono::milliseconds value, const char* field) {
    if (value.count() <= 0) {
      throw ConfigError(std::string("ClientOptions::") + field + " must be at least 1 ms, got " +
                        std::to_string(value.count()) + " ms");
    }
  };
  positive(options.connect_timeout, "connect_timeout");
  positive(options.command_timeout, "command_timeout");
  positive(options.reconnect_min, "reconnect_min");
  if (options.reconnect_max < options.reconnect_min) {
    throw ConfigError("ClientOptions::reconnect_max must be at least reconnect_min (" +
                      std::to_string(options.reconnect_min.count()) + " ms)");
  }
  if (options.max_pending == 0) throw ConfigError("ClientOptions::max_pending must be at least 1");
  if (options.max_batch == 0 || options.max_batch > max_batch_limit) {
    throw ConfigError("ClientOptions::max_batch must be from 1 to " +
                      std::to_string(max_batch_limit) + ", got " +
                      std::to_string(options.max_batch));
  }
  // Why a floor: a lease is renewed every third of it; one of a few ms would be renewed a
  // thousand times a second per waiter and lapse whenever a round trip is slower than it.
  const auto lease = options.reservation_lease;
  if (lease.count() != 0 && lease < min_reservation_lease) {
    throw ConfigError("ClientOptions::reservation_lease must be 0 (off) or at least " +
                      std::to_string(min_reservation_lease.count()) + " ms, got " +
                      std::to_string(lease.count()) + " ms");
  }
  if (options.stats_interval.count() != 0 && options.stats_interval < min_stats_interval) {
    throw ConfigError("ClientOptions::stats_interval must be 0 (off) or at least " +
                      std::to_string(min_stats_interval.count()) + " ms, got " +
                      std::to_string(options.stats_interval.count()) + " ms");
  }
  if (options.replicas < 0) {
    throw ConfigError("ClientOptions::replicas must be 0 (off) or more, got " +
                      std::to_string(options.replicas));
  }
  // Why below command_timeout: a WAIT blocks its connection, and one still blocking at the
  // call's deadline would make the connection count as lost.
  if (options.replicas > 0 && (options.replica_timeout.count() <= 0 ||
                               options.replica_timeout >= options.command_timeout)) {
    throw ConfigError(
        "ClientOptions::replica_timeout must be from 1 ms to less than "
        "command_timeout (" +
        std::to_string(options.command_timeout.count()) + " ms), got " +
        std::to_string(options.replica_timeout.count()) + " ms");
  }
  if (!options.logger) options.logger = default_logger();
  if (!options.metrics) options.metrics = std::make_shared<Metrics>();
  if (options.id.empty()) {
    options.id = random_client_id();
  } else if (options.id.size() > 64 ||
             options.id.find_first_not_of(client_id_characters) != std::string::npos) {
    throw ConfigError("ClientOptions::id must be 1 to 64 characters from [A-Za-z0-9_.-], got '" +
                      options.id + "'");
  }
  return options;
}

ConnectionSettings settings_of(const ClientOptions& options, std::shared_ptr<TlsContext> tls,
                               std::uint64_t* contact_breaks) {
  return {.connect_timeout = options.connect_timeout,
          .reconnect_min = options.reconnect_min,
          .reconnect_max = options.reconnect_max,
          .max_pending = options.max_pending,
          .metrics = &options.metrics->redis(),
          .tls = std::move(tls),
          .contact_breaks = contact_breaks};
}

/// The TLS configuration of a `rediss://` URL, loaded now (a ConfigError before any I/O);
/// null for other URLs.
std::shared_ptr<TlsContext> tls_of(const ClientOptions& options) {
  const bool tls = is_sentinel_url(options.url)   ? parse_sentinel_url(options.url).primary.tls
                   : !is_cluster_url(options.url) ? parse_redis_url(options.url).tls
                                                  : false;
  return tls ? std::make_shared<TlsContext>(options.tls) : nullptr;
}

std::unique_ptr<SlotRouter> make_router(uv_loop_t* loop, BackgroundTasks& tasks,
                                        const ClientOptions& options,
                                        const std::shared_ptr<TlsContext>& tls,
                                        std::uint64_t* contact_breaks) {
  if (is_cluster_url(options.url)) {
    return std::make_unique<ClusterRouter>(loop, tasks, parse_cluster_url(options.url),
                                           settings_of(options, tls, contact_breaks),
                                           options.command_timeout, options.logger);
  }
  if (is_sentinel_url(options.url)) {
    SentinelConfig config = parse_sentinel_url(options.url);
    for (Endpoint& sentinel : config.sentinels) {
      sentinel.user = options.sentinel_user;
      sentinel.password = options.sentinel_password;
    }
    // Why the sentinels' connections count no contact: a sentinel holds none of the data.
    return std::make_unique<SentinelRouter>(
        loop, tasks, std::move(config), settings_of(options, tls, contact_breaks),
        settings_of(options, tls, nullptr), options.command_timeout, options.logger);
  }
  return std::make_unique<SingleNodeRouter>(
      std::make_unique<Connection>(loop, parse_redis_url(options.url),
                                   settings_of(options, tls, contact_breaks), options.logger));
}

}  // namespace

CommandDispatcher::CommandDispatcher(uv_loop_t* loop, ClientOptions options)
    : loop_(loop),
      options_(validated(std::move(options))),
      tls_(tls_of(options_)),
      router_(make_router(loop, background_, options_, tls_, &contact_breaks_)) {}

Subscriber& CommandDispatcher::subscriber() {
  check_thread();
  if (!subscriber_) {
    // Why no contact counted: the data connections count a restart; a lost subscription is
    // made good by the read that follows its confirmation.
    ConnectionSettings settings = settings_of(options_, tls_, nullptr);
    settings.endpoint_source = router_->endpoint_source();
    subscriber_ = std::make_unique<Subscriber>(loop_, router_->subscriber_endpoints(), settings,
                                               options_.logger);
  }
  return *subscriber_;
}

std::optional<std::uint16_t> CommandDispatcher::slot_of(std::string_view key) const noexcept {
  if (!router_->is_cluster()) return std::nullopt;  // one server serves every slot
  return key_slot(key);
}

void CommandDispatcher::check_thread() const {
  if (std::this_thread::get_id() != owner_thread_) {
    throw UsageError("a redlimit Client was used from a thread other than its loop's");
  }
}

Task<void> CommandDispatcher::connect() {
  check_thread();
  co_await router_->connect(Clock::now() + options_.connect_timeout + options_.command_timeout);
}

Task<void> CommandDispatcher::close() {
  if (close_requested_) {
    co_await closed_.wait();
    co_return;
  }
  close_requested_ = true;
  // Why before the background work: a call waiting for permits gives its reservations back
  // as it ends, and those calls must still reach Redis.
  co_await background_.end_waiting_calls();
  // Why first: a release or refund started before close() must still reach Redis, or its
  // permits stay taken until their TTL; each is bounded by its command deadline.
  co_await background_.wait_all();
  background_.stop_accepting();
  // Why before the connections close: what the decorator holds (batches in flight) is
  // answered as it would be alone.
  if (decorator_) co_await decorator_->close();
  co_await router_->close();
  if (subscriber_) co_await subscriber_->close();
  // Why last: what the router and the decorator started ends as they close; nothing outlives
  // close().
  co_await background_.join();
  // Why last: a waiter resumed here may destroy the client.
  closed_.set();
}

Task<CommandResult> CommandDispatcher::send_asking(Connection& connection,
                                                   std::span<const std::string_view> argv,
                                                   Clock::time_point deadline, bool follow_up,
                                                   std::shared_ptr<WaitRound>* round) {
  // Why both sends before either await: ASKING applies to the very next command on its
  // connection, and sends go out in call order.
  auto [ask, command] = connection.send_asking(argv, deadline, follow_up);
  // Why not when done already: it failed before it was sent (a closed client), and no WAIT
  // covers what was never written.
  if (round != nullptr && !command.await_ready())
    *round = replica_waits(connection).cover(deadline);
  CommandResult asked = co_await std::move(ask);
  if (asked.reply.type == Reply::Type::error) co_return asked;  // e.g. no +asking in the ACL
  co_return co_await std::move(command);
}

ReplicaWaits& CommandDispatcher::replica_waits(Connection& connection) {
  if (connection.replica_waits() == nullptr) {
    connection.attach_replica_waits(
        std::make_unique<ReplicaWaits>(loop_, connection, background_, options_.replicas,
                                       options_.replica_timeout, options_.command_timeout));
  }
  return *connection.replica_waits();
}

Task<Reply> CommandDispatcher::execute(std::optional<std::uint16_t> slot, CommandArgv argv,
                                       const scripts::ScriptSource* script,
                                       Clock::time_point deadline, Terms terms, std::size_t calls,
                                       Hold hold, std::optional<ReplicaAck>* ack) {
  if (hold.holder != nullptr) {
    HeldCall held(*hold.holder, slot, *script, hold.keys, hold.args, deadline);
    co_await held;
    // Why outside the handler below: whoever answered the call counted its error.
    if (!held.alone) co_return held.take_reply();
  }
  // Why one handler around the whole body: every error leaves through it as the caller gets
  // it (a failure that opened the breaker as CircuitOpen), and it costs nothing until thrown.
  try {
    if (const std::exception_ptr error = router_->config_error()) std::rethrow_exception(error);
    Connection* target = &router_->route(slot);
    BreakerScope breaker = terms.guarded ? guard(*target) : BreakerScope();
    if (terms.guarded) redis_metrics_.batch_size.observe(static_cast<double>(calls));
    bool asking = false;
    Hops hops;
    std::vector<std::string_view> reload;  // the command again after NOSCRIPT
    // The WAIT that covers the last try's script call (ClientOptions::replicas).
    const bool replicated = options_.replicas > 0 && script != nullptr && terms.guarded;
    std::shared_ptr<WaitRound> round;
    CommandResult result;
    std::exception_ptr failure;
    for (;;) {
      failure = nullptr;
      bool unsent = false;
      try {
        // One try on one connection: ASKING first when asking, EVAL after NOSCRIPT.
        // Why not a coroutine of its own: this runs once per decision, and a coroutine layer
        // costs a frame and a resumption.
        std::span<const std::string_view> command = first_send(*target, script, argv, reload);
        for (int reloads = 0;; ++reloads) {
          // Why a follow-up: a command in flight when close() began is still answered, and
          // its reload is part of it.
          const bool follow_up = reloads > 0;
          if (asking) {
            result = co_await send_asking(*target, command, deadline, follow_up,
                                          replicated ? &round : nullptr);
          } else {
            CommandAwaiter sent = target->send(command, deadline, follow_up);
            // Why before awaiting the call: WAIT covers what its connection wrote before it,
            // and right behind the call it costs no round trip of its own.
            // Why not when done already: as in send_asking().
            if (replicated && !sent.await_ready()) round = replica_waits(*target).cover(deadline);
            result = co_await std::move(sent);
          }
          if (!reloads_after(script, result, reloads, *target)) break;
          command =
              scripts_.after_noscript(*target, *script, result.sequence, argv.words(), reload);
        }
      } catch (const ConnectionError& e) {
        failure = std::current_exception();
        unsent = !e.maybe_executed();
      } catch (...) {  // a timeout, overload or closed client: nothing another node can fix
        failure = std::current_exception();
        break;
      }
      const TryOutcome outcome{*target, failure ? nullptr : &result.reply, unsent};
      // Why asked first: a MOVED updates the slot map even when the command does not follow it.
      const NextTry next = router_->next_try(outcome, slot, hops);
      if (!failure && answers_at_once(terms, result.reply)) {
        // Why an answer: the node answered; nothing is wrong with it (and a half-open breaker
        // whose probe this was would otherwise refuse the calls that follow).
        breaker.answered();
        co_return answer(std::move(result.reply), script);
      }
      if (next.kind == NextTry::Kind::answer) break;
      if (next.kind == NextTry::Kind::resend) {
        if (next.from_failed_server && terms.guarded) {
          breaker.leave(failure, result.reply);
          breaker = guard(*next.target);
        }
        target = next.target;
        asking = next.asking;
        continue;
      }
      if (Clock::now() + next.delay >= deadline) break;
      co_await sleep_for(loop_, next.delay);
      target = &router_->route(slot);
      asking = false;
    }
    if (!failure && round && result.reply.type != Reply::Type::error) {
      // Why the breaker goes with the WAIT: the call ends, for the breaker, once its writes
      // are known to be held or not.
      ReplicaAck replicas(std::move(round), options_.replicas, breaker, &redis_metrics_,
                          target->name());
      if (ack != nullptr) {
        ack->emplace(std::move(replicas));
      } else if (wrote(*script, hold.args, result.reply)) {
        failure = co_await replicas.confirm();
        if (failure) std::rethrow_exception(failure);
      } else {
        replicas.skip();
      }
      co_return answer(std::move(result.reply), script);
    }
    breaker.leave(failure, result.reply);
    if (failure) std::rethrow_exception(failure);
    co_return answer(std::move(result.reply), script);
  } catch (...) {
    if (terms.counts_error) count_redis_error(redis_metrics_, std::current_exception());
    throw;
  }
}

bool CommandDispatcher::answers_at_once(const Terms& terms, const Reply& reply) {
  if (reply.type != Reply::Type::error || !(terms.answers_try_again || terms.answers_redirects)) {
    return false;
  }
  const std::string code = error_code(reply.str);
  if (code == "TRYAGAIN" || code == "CROSSSLOT") return terms.answers_try_again;
  return terms.answers_redirects && (code == "MOVED" || code == "ASK");
}

std::span<const std::string_view> CommandDispatcher::first_send(
    Connection& target, const scripts::ScriptSource* script, const CommandArgv& argv,
    std::vector<std::string_view>& reload) const {
  if (script == nullptr) return argv.words();
  return scripts_.first_send(target, *script, argv.words(), reload);
}

bool CommandDispatcher::reloads_after(const scripts::ScriptSource* script,
                                      const CommandResult& result, int reloads,
                                      const Connection& target) const {
  // Why up to two reloads: a SCRIPT FLUSH may land between another call's reload and ours.
  // Why not on a retired connection: its node left the slot map, and the router sends the
  // call to the node that serves the slot now.
  return script != nullptr && reloads < 2 && ScriptRegistry::is_noscript(result.reply) &&
         !router_->retired(target);
}

BreakerScope CommandDispatcher::guard(Connection& server) {
  CircuitBreaker* breaker = server.breaker();
  if (breaker == nullptr) {
    auto found = breakers_.find(server.name());
    if (found == breakers_.end()) {
      CircuitBreaker::Settings settings{
          .probe_timeout = options_.command_timeout + std::chrono::milliseconds(100),
          .server = server.name()};
      found = breakers_.try_emplace(server.name(), std::move(settings), &redis_metrics_).first;
    }
    breaker = &found->second;
    server.attach_breaker(breaker);
  }
  return BreakerScope(*breaker, *logger());
}

Reply CommandDispatcher::answer(Reply reply, const scripts::ScriptSource* script) const {
  if (reply.type == Reply::Type::error) {
    if (script == nullptr) raise(reply.str, {});
    raise(reply.str,
          "script '" + std::string(script->name) + "' calls: " + std::string(script->commands));
  }
  return reply;
}

Task<Reply> CommandDispatcher::command(std::vector<std::string> argv) {
  check_thread();
  if (argv.empty()) throw InvalidArgument("Client::command: argv must name a command");
  if (changes_connection_mode(argv)) {
    throw InvalidArgument("Client::command: " + argv[0] +
                          " would turn the connection into a pub/sub or MONITOR one");
  }
  // Why separate statements: g++ 12 miscompiles conditional temporaries inside co_await.
  const auto key = routing_key(argv);
  const std::optional<std::uint16_t> slot = key ? slot_of(*key) : std::nullopt;
  const std::vector<std::string_view> views(argv.begin(), argv.end());
  co_return co_await execute(slot, CommandArgv(views), nullptr, command_deadline(), plain_command);
}

// Why not coroutines: they only prepare the command, and a layer more would cost a frame per
// decision; the words move into execute()'s frame.
Task<Reply> CommandDispatcher::eval(const scripts::ScriptSource& script,
                                    std::span<const std::string_view> keys,
                                    std::span<const std::string_view> args,
                                    Clock::time_point deadline) {
  return eval_holding(nullptr, script, keys, args, deadline);
}

Task<Reply> CommandDispatcher::eval_held(HeldCall::Holder& holder,
                                         const scripts::ScriptSource& script,
                                         std::span<const std::string_view> keys,
                                         std::span<const std::string_view> args,
                                         Clock::time_point deadline) {
  return eval_holding(&holder, script, keys, args, deadline);
}

Task<Reply> CommandDispatcher::eval_holding(HeldCall::Holder* holder,
                                            const scripts::ScriptSource& script,
                                            std::span<const std::string_view> keys,
                                            std::span<const std::string_view> args,
                                            Clock::time_point deadline) {
  try {
    check_thread();
    const std::optional<std::uint16_t> slot = keys.empty() ? std::nullopt : slot_of(keys.front());
    const Hold hold{.holder = holder, .keys = keys, .args = args};
    return execute(slot, scripts_.evalsha(script, keys, args), &script, deadline, application_call,
                   1, hold);
  } catch (...) {
    return failed_task<Reply>(std::current_exception());
  }
}

Task<Reply> CommandDispatcher::eval_batch(const scripts::ScriptSource& script,
                                          std::span<const std::string_view> keys,
                                          std::span<const std::string_view> args,
                                          Clock::time_point deadline, std::size_t calls,
                                          bool across_slots, std::optional<ReplicaAck>& ack) {
  try {
    check_thread();
    const std::optional<std::uint16_t> slot = keys.empty() ? std::nullopt : slot_of(keys.front());
    return execute(slot, scripts_.evalsha(script, keys, args), &script, deadline,
                   across_slots ? batch_across_slots_call : batch_call, calls, {}, &ack);
  } catch (...) {
    return failed_task<Reply>(std::current_exception());
  }
}

Task<Reply> CommandDispatcher::eval_own(const scripts::ScriptSource& script,
                                        std::span<const std::string_view> keys,
                                        std::span<const std::string_view> args,
                                        Clock::time_point deadline) {
  check_thread();
  const std::optional<std::uint16_t> slot = keys.empty() ? std::nullopt : slot_of(keys.front());
  co_return co_await execute(slot, scripts_.evalsha(script, keys, args), &script, deadline,
                             own_call);
}

ScriptExecutor& CommandDispatcher::decorated(DecoratorFactory make) {
  // Why not after close() began: close() would not close a decorator made now.
  if (!decorator_ && close_requested_) return *this;
  if (!decorator_) decorator_ = make(*this);
  return *decorator_;
}

void CommandDispatcher::raise(const std::string& error, std::string_view hint) const {
  if (!router_->is_cluster() && parse_redirect(error, {})) {
    throw ConfigError("Redis answered '" + error +
                      "': the server is a Redis Cluster node; use a redis-cluster:// URL");
  }
  std::rethrow_exception(exception_from_error(error, hint));
}

}  // namespace redlimit::detail
