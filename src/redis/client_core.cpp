#include "redis/client_core.hpp"

#include <algorithm>

#include "redis/cluster_router.hpp"
#include "redis/command_keys.hpp"
#include "redis/endpoint.hpp"
#include "redis/key_slot.hpp"
#include "redis/reply_convert.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "runtime/failed_task.hpp"
#include "runtime/logger.hpp"

namespace redlimit::detail {
namespace {

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
  if (!options.logger) options.logger = default_logger();
  return options;
}

bool is_noscript(const Reply& reply) {
  return reply.type == Reply::Type::error && reply.str.rfind("NOSCRIPT", 0) == 0;
}

ConnectionSettings settings_of(const ClientOptions& options) {
  return {options.connect_timeout, options.reconnect_min, options.reconnect_max,
          options.max_pending};
}

std::unique_ptr<SlotRouter> make_router(uv_loop_t* loop, const ClientOptions& options) {
  if (is_cluster_url(options.url)) {
    return std::make_unique<ClusterRouter>(loop, parse_cluster_url(options.url),
                                           settings_of(options), options.command_timeout,
                                           options.logger);
  }
  return std::make_unique<SingleNodeRouter>(std::make_unique<Connection>(
      loop, parse_redis_url(options.url), settings_of(options), options.logger));
}

/// The pause before retrying a cluster error that says "not now" (a slot migrating, a
/// failover in progress): 2, 4, 8 ... ms, at most 100 ms.
std::chrono::milliseconds retry_delay(int retries) {
  return std::chrono::milliseconds(std::min(100, 2 << std::min(retries, 6)));
}

}  // namespace

ClientCore::ClientCore(uv_loop_t* loop, ClientOptions options)
    : loop_(loop), options_(validated(std::move(options))), router_(make_router(loop, options_)) {}

Subscriber& ClientCore::subscriber() {
  check_thread();
  if (!subscriber_) {
    subscriber_ = std::make_unique<Subscriber>(loop_, router_->subscriber_endpoints(),
                                               settings_of(options_), options_.logger);
  }
  return *subscriber_;
}

std::optional<std::uint16_t> ClientCore::slot_of(std::string_view key) const noexcept {
  if (!router_->is_cluster()) return std::nullopt;  // one server serves every slot
  return key_slot(key);
}

CircuitBreaker& ClientCore::breaker_for(std::string_view key) {
  const std::string& server = router_->route(slot_of(key)).name();
  const auto found = breakers_.find(server);
  if (found != breakers_.end()) return found->second;
  const CircuitBreaker::Settings settings{.probe_timeout = options_.command_timeout +
                                                           std::chrono::milliseconds(100)};
  return breakers_.emplace(server, CircuitBreaker(settings)).first->second;
}

void ClientCore::check_thread() const {
  if (std::this_thread::get_id() != owner_thread_) {
    throw UsageError("a redlimit Client was used from a thread other than its loop's");
  }
}

Task<void> ClientCore::connect() {
  check_thread();
  co_await router_->connect(Clock::now() + options_.connect_timeout + options_.command_timeout);
}

Task<void> ClientCore::close() {
  if (close_requested_) {
    co_await closed_.wait();
    co_return;
  }
  close_requested_ = true;
  // Why first: a release or refund started before close() must still reach Redis, or its
  // permits stay taken until their TTL; each is bounded by its command deadline.
  co_await background_.wait_all();
  closing_ = true;
  co_await router_->close();
  if (subscriber_) co_await subscriber_->close();
  // Why last: a waiter resumed here may destroy the client.
  closed_.set();
}

Task<CommandResult> ClientCore::send_asking(Connection& connection,
                                            std::span<const std::string_view> argv,
                                            Clock::time_point deadline) {
  // Why both sends before either await: ASKING applies to the very next command on its
  // connection, and sends go out in call order.
  auto [ask, command] = connection.send_asking(argv, deadline);
  CommandResult asked = co_await std::move(ask);
  if (asked.reply.type == Reply::Type::error) co_return asked;  // e.g. no +asking in the ACL
  co_return co_await std::move(command);
}

Task<Reply> ClientCore::execute(std::optional<std::uint16_t> slot, CommandArgv argv,
                                const scripts::ScriptSource* script, Clock::time_point deadline) {
  if (const std::exception_ptr error = router_->config_error()) std::rethrow_exception(error);
  Connection* target = &router_->route(slot);
  bool asking = false;
  int redirects = 0;
  int retries = 0;
  std::vector<std::string_view> reload;  // the command again after NOSCRIPT
  for (;;) {
    if (!target->accepting() && !closing_) {  // its node left the slot map meanwhile
      target = &router_->route(slot);
      asking = false;
    }
    CommandResult result;
    std::exception_ptr failure;
    bool unsent = false;
    try {
      // One try on one connection: ASKING first when asking, EVAL after NOSCRIPT.
      // Why not a coroutine of its own: this runs once per decision, and a coroutine layer
      // costs a frame and a resumption.
      std::span<const std::string_view> command = argv.words();
      // Why up to two reloads: a SCRIPT FLUSH may land between another call's reload and ours.
      for (int reloads = 0;; ++reloads) {
        if (asking) {
          result = co_await send_asking(*target, command, deadline);
        } else {
          result = co_await target->send(command, deadline);
        }
        if (script == nullptr || reloads == 2 || !is_noscript(result.reply) ||
            !target->accepting()) {
          break;
        }
        reload.assign(argv.words().begin(), argv.words().end());
        if (!target->script_loaded_after(script->index, result.sequence)) {
          reload[0] = "EVAL";
          reload[1] = script->source;
          target->note_script_load(script->index);
        }
        command = reload;
      }
    } catch (const ConnectionError& e) {
      failure = std::current_exception();
      unsent = !e.maybe_executed();
    }
    // Why retry here: a connection closed because its node left the slot map fails what it
    // had not sent yet; the node that serves the slot now can take it.
    const bool retired = router_->is_cluster() && !target->accepting() && !closing_;
    if (retired && (unsent || (!failure && is_noscript(result.reply)))) {
      if (++redirects <= max_redirects) continue;
      if (failure) std::rethrow_exception(failure);
      co_return answer(result, script);
    }
    if (failure) {
      router_->suspect_topology();
      std::rethrow_exception(failure);
    }
    if (result.reply.type != Reply::Type::error || !router_->is_cluster()) {
      co_return answer(result, script);
    }

    switch (classify_cluster_error(result.reply.str)) {
      case ClusterErrorKind::redirect: {
        const auto redirect = parse_redirect(result.reply.str, target->endpoint().host);
        Connection* next = redirect ? router_->follow(*redirect) : nullptr;
        if (next == nullptr || ++redirects > max_redirects) co_return answer(result, script);
        target = next;
        asking = redirect->kind == Redirect::Kind::ask;
        continue;
      }
      case ClusterErrorKind::stale_map:
      case ClusterErrorKind::retry_later: {
        if (error_code(result.reply.str) != "TRYAGAIN") router_->suspect_topology();
        const auto delay = retry_delay(retries++);
        if (Clock::now() + delay >= deadline) co_return answer(result, script);
        co_await sleep_for(loop_, delay);
        target = &router_->route(slot);
        asking = false;
        continue;
      }
      case ClusterErrorKind::other:
        co_return answer(result, script);
    }
  }
}

Reply ClientCore::answer(CommandResult& result, const scripts::ScriptSource* script) const {
  if (result.reply.type == Reply::Type::error) {
    if (script == nullptr) raise(result.reply.str, {});
    raise(result.reply.str,
          "script '" + std::string(script->name) + "' calls: " + std::string(script->commands));
  }
  return std::move(result.reply);
}

Task<Reply> ClientCore::command(std::vector<std::string> argv) {
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
  co_return co_await execute(slot, CommandArgv(views), nullptr, command_deadline());
}

// Why not a coroutine: it only prepares the command, and a layer more would cost a frame per
// decision; the words move into execute()'s frame.
Task<Reply> ClientCore::eval(const scripts::ScriptSource& script,
                             std::span<const std::string_view> keys,
                             std::span<const std::string_view> args, Clock::time_point deadline) {
  try {
    check_thread();
    const std::optional<std::uint16_t> slot = keys.empty() ? std::nullopt : slot_of(keys.front());
    return execute(slot, CommandArgv::evalsha(script, keys, args), &script, deadline);
  } catch (...) {
    return failed_task<Reply>(std::current_exception());
  }
}

void ClientCore::raise(const std::string& error, std::string_view hint) const {
  if (!router_->is_cluster() && parse_redirect(error, {})) {
    throw ConfigError("Redis answered '" + error +
                      "': the server is a Redis Cluster node; use a redis-cluster:// URL");
  }
  std::rethrow_exception(exception_from_error(error, hint));
}

}  // namespace redlimit::detail
