#include "redis/client_core.hpp"

#include <array>

#include "redis/command_keys.hpp"
#include "redis/endpoint.hpp"
#include "redis/key_slot.hpp"
#include "redis/reply_convert.hpp"
#include "redlimit/errors.hpp"
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

}  // namespace

namespace {

ConnectionSettings settings_of(const ClientOptions& options) {
  return {options.connect_timeout, options.reconnect_min, options.reconnect_max,
          options.max_pending};
}

}  // namespace

ClientCore::ClientCore(uv_loop_t* loop, ClientOptions options)
    : loop_(loop),
      options_(validated(std::move(options))),
      endpoint_(parse_redis_url(options_.url)),
      breaker_(CircuitBreaker::Settings{.probe_timeout = options_.command_timeout +
                                                         std::chrono::milliseconds(100)}) {
  router_ = std::make_unique<SingleNodeRouter>(
      std::make_unique<Connection>(loop, endpoint_, settings_of(options_), options_.logger));
}

Subscriber& ClientCore::subscriber() {
  check_thread();
  if (!subscriber_) {
    subscriber_ =
        std::make_unique<Subscriber>(loop_, endpoint_, settings_of(options_), options_.logger);
  }
  return *subscriber_;
}

void ClientCore::check_thread() const {
  if (std::this_thread::get_id() != owner_thread_) {
    throw UsageError("a redlimit Client was used from a thread other than its loop's");
  }
}

Task<void> ClientCore::connect() {
  check_thread();
  const std::array<std::string_view, 1> ping = {"PING"};
  CommandResult result =
      co_await router_->route(std::nullopt)
          .send(ping, Clock::now() + options_.connect_timeout + options_.command_timeout);
  if (result.reply.type == Reply::Type::error) {
    std::rethrow_exception(exception_from_error(result.reply.str));
  }
}

Task<void> ClientCore::close() {
  if (closing_) {
    co_await closed_.wait();
    co_return;
  }
  closing_ = true;
  co_await router_->close();
  if (subscriber_) co_await subscriber_->close();
  // Why last: a waiter resumed here may destroy the client.
  closed_.set();
}

Task<Reply> ClientCore::command(std::vector<std::string> argv) {
  check_thread();
  if (argv.empty()) throw InvalidArgument("Client::command: argv must name a command");
  const auto key = routing_key(argv);
  Connection& connection =
      router_->route(key ? std::optional<std::uint16_t>(key_slot(*key)) : std::nullopt);
  const std::vector<std::string_view> views(argv.begin(), argv.end());
  CommandResult result = co_await connection.send(views, command_deadline());
  if (result.reply.type == Reply::Type::error) {
    std::rethrow_exception(exception_from_error(result.reply.str));
  }
  co_return std::move(result.reply);
}

Task<Reply> ClientCore::eval(const scripts::ScriptSource& script,
                             std::span<const std::string_view> keys,
                             std::span<const std::string_view> args, Clock::time_point deadline) {
  check_thread();
  Connection& connection = router_->route(
      keys.empty() ? std::nullopt : std::optional<std::uint16_t>(key_slot(keys.front())));
  const std::string key_count = std::to_string(keys.size());
  std::vector<std::string_view> argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.push_back("EVALSHA");
  argv.push_back(script.sha1);
  argv.push_back(key_count);
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());

  CommandResult result = co_await connection.send(argv, deadline);
  if (is_noscript(result.reply) && connection.script_loaded_after(script.index, result.sequence)) {
    result = co_await connection.send(argv, deadline);
  }
  if (is_noscript(result.reply)) {
    argv[0] = "EVAL";
    argv[1] = script.source;
    connection.note_script_load(script.index);
    result = co_await connection.send(argv, deadline);
  }
  if (result.reply.type == Reply::Type::error) {
    std::rethrow_exception(exception_from_error(
        result.reply.str,
        "script '" + std::string(script.name) + "' calls: " + std::string(script.commands)));
  }
  co_return std::move(result.reply);
}

}  // namespace redlimit::detail
