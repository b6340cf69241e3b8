#include "command_line.hpp"

#include <map>

#include "inspect_command.hpp"
#include "policy_commands.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limit.hpp"
#include "redlimit/redis_keys.hpp"
#include "text_format.hpp"
#include "top_command.hpp"
#include "watch_command.hpp"

namespace redlimit_cli {
namespace {

/// Accepts a POLICY text that redlimit::Policy::parse() takes; else its message (exit 2).
const CLI::Validator policy_text(
    [](std::string& text) -> std::string {
      try {
        redlimit::Policy::parse(text);
        return {};
      } catch (const redlimit::InvalidArgument& e) {
        return e.what();
      }
    },
    "POLICY", "policy text");

/// Accepts an --interval that parse_interval() takes.
const CLI::Validator interval_text(
    [](std::string& text) -> std::string {
      return parse_interval(text) ? std::string()
                                  : "expected a duration from 100ms to 24h, e.g. 1s, 500ms, 2m";
    },
    "DURATION", "interval");

/// Accepts a --client-id that ClientOptions::id takes.
const CLI::Validator client_id_text(
    [](std::string& text) -> std::string {
      return redlimit::is_valid_prefix(text)
                 ? std::string()
                 : "expected 1 to 64 characters from [A-Za-z0-9_.-] (a ClientOptions::id)";
    },
    "ID", "client id");

/// Accepts a NAME a limiter takes. Why checked here: a command must refuse it before it reads
/// Redis (an empty name would SCAN, or be reported as not found).
const CLI::Validator name_text(
    [](std::string& text) -> std::string {
      return redlimit::is_valid_name(text) ? std::string()
                                           : "expected 1 to 128 bytes (a LimiterOptions::name)";
    },
    "NAME", "limiter name");

/// Accepts a KEY a limiter's calls take.
const CLI::Validator key_text(
    [](std::string& text) -> std::string {
      return redlimit::is_valid_key(text) ? std::string() : "expected 1 to 65536 bytes";
    },
    "KEY", "key");

void add_name(CLI::App* command, CommandArguments& args) {
  command->add_option("NAME", args.name, "the limiter's name (LimiterOptions::name)")
      ->required()
      ->check(name_text);
}

void add_key(CLI::App* command, CommandArguments& args) {
  command->add_option("KEY", args.key, "the key, as the application passes it")
      ->required()
      ->check(key_text);
}

void add_policy(CLI::App* command, CommandArguments& args) {
  command
      ->add_option("POLICY", args.policy,
                   "the policy's text, e.g. \"gcra 10/s burst 20; fixed_window 1000/day\"")
      ->required()
      ->check(policy_text);
}

void add_policy_commands(CLI::App& app, CommandArguments& args, Invocation& invocation) {
  CLI::App* policy = app.add_subcommand("policy", "the policies stored for limiters to follow");
  policy->require_subcommand(1);

  CLI::App* get = policy->add_subcommand("get", "show a name's policy, version and overrides");
  add_name(get, args);
  get->callback([&] {
    invocation.body = [global = invocation.global, name = args.name](redlimit::Client& client,
                                                                     std::stop_token) {
      return policy_get(client, global, name);
    };
  });

  const std::map<std::string, redlimit::Carry> carries{
      {"as_is", redlimit::Carry::as_is},
      {"proportional", redlimit::Carry::proportional},
      {"reset", redlimit::Carry::reset}};
  CLI::App* set = policy->add_subcommand("set", "store a name's policy, replacing any");
  add_name(set, args);
  add_policy(set, args);
  set->add_option("--carry", args.carry, "how keys' state carries over to the new policy")
      ->transform(CLI::CheckedTransformer(carries))
      ->option_text("as_is|proportional|reset (default: as_is)");
  set->callback([&] {
    invocation.body = [global = invocation.global, name = args.name,
                       policy = redlimit::Policy::parse(args.policy),
                       carry = args.carry](redlimit::Client& client, std::stop_token) {
      return policy_set(client, global, name, policy, carry);
    };
  });

  CLI::App* try_set = policy->add_subcommand(
      "try-set", "store a name's policy only if it has none (exit 1 if it has)");
  add_name(try_set, args);
  add_policy(try_set, args);
  try_set->callback([&] {
    invocation.body = [global = invocation.global, name = args.name,
                       policy = redlimit::Policy::parse(args.policy)](redlimit::Client& client,
                                                                      std::stop_token) {
      return policy_try_set(client, global, name, policy);
    };
  });

  CLI::App* remove = policy->add_subcommand("remove", "remove a name's policy and overrides");
  add_name(remove, args);
  remove->callback([&] {
    invocation.body = [global = invocation.global, name = args.name](redlimit::Client& client,
                                                                     std::stop_token) {
      return policy_remove(client, global, name);
    };
  });
}

void add_override_commands(CLI::App& app, CommandArguments& args, Invocation& invocation) {
  CLI::App* override_command =
      app.add_subcommand("override", "per-key policies that replace a name's policy");
  override_command->require_subcommand(1);

  CLI::App* set = override_command->add_subcommand("set", "make a key follow its own policy");
  add_name(set, args);
  add_key(set, args);
  add_policy(set, args);
  set->callback([&] {
    invocation.body = [global = invocation.global, name = args.name, key = args.key,
                       policy = redlimit::Policy::parse(args.policy)](redlimit::Client& client,
                                                                      std::stop_token) {
      return override_set(client, global, name, key, policy);
    };
  });

  CLI::App* remove =
      override_command->add_subcommand("remove", "return a key to the name's policy");
  add_name(remove, args);
  add_key(remove, args);
  remove->callback([&] {
    invocation.body = [global = invocation.global, name = args.name, key = args.key](
                          redlimit::Client& client, std::stop_token) {
      return override_remove(client, global, name, key);
    };
  });
}

void add_key_commands(CLI::App& app, CommandArguments& args, Invocation& invocation) {
  CLI::App* inspect = app.add_subcommand(
      "inspect", "every limit's state for a key, consuming nothing (exit 1 if it would deny)");
  add_name(inspect, args);
  add_key(inspect, args);
  inspect->callback([&] {
    invocation.body = [global = invocation.global, name = args.name, key = args.key](
                          redlimit::Client& client, std::stop_token) {
      return inspect_key(client, global, name, key);
    };
  });

  CLI::App* reset = app.add_subcommand("reset", "forget a key's state: it starts again full");
  add_name(reset, args);
  add_key(reset, args);
  reset->callback([&] {
    invocation.body = [global = invocation.global, name = args.name, key = args.key](
                          redlimit::Client& client, std::stop_token) {
      return reset_key(client, global, name, key);
    };
  });

  CLI::App* top = app.add_subcommand("top", "the keys nearest their limits, from a SCAN sample");
  add_name(top, args);
  top->add_option("--count", args.count, "rows to show")
      ->check(CLI::Range(std::size_t{1}, std::size_t{100'000}))
      ->capture_default_str();
  top->add_option("--sample", args.sample, "keys to sample at most")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1'000'000}))
      ->capture_default_str();
  top->add_option("--scan-limit", args.scan_limit,
                  "Redis keys the SCAN examines at most, the limiter's or not")
      ->check(CLI::Range(std::size_t{1'000}, std::size_t{100'000'000}))
      ->capture_default_str();
  top->callback([&] {
    invocation.body =
        [global = invocation.global,
         request = TopRequest{.name = args.name,
                              .count = args.count,
                              .sample = {.keys = args.sample, .examined = args.scan_limit}}](
            redlimit::Client& client, std::stop_token stop) {
          return top_keys(client, global, request, std::move(stop));
        };
  });
}

void add_watch_command(CLI::App& app, CommandArguments& args, Invocation& invocation) {
  CLI::App* watch =
      app.add_subcommand("watch", "decisions per second and denials per limiter, refreshed");
  watch->add_option("NAME", args.names, "the limiters to show (default: all)");
  watch
      ->add_option("--interval", args.interval,
                   "time between refreshes, from 100ms to 24h (default: 1s)")
      ->check(interval_text);
  watch->add_flag("--once", args.once, "print one refresh after one interval, and exit");
  watch->callback([&] {
    invocation.body = [global = invocation.global,
                       request = WatchRequest{.names = args.names,
                                              .interval = *parse_interval(args.interval),
                                              .once = args.once}](redlimit::Client& client,
                                                                  std::stop_token stop) {
      return watch_rates(client, global, request, std::move(stop));
    };
  });
}

}  // namespace

void add_commands(CLI::App& app, Invocation& invocation) {
  // Why fallthrough: the global options may come after the subcommand (`policy get sms --json`).
  app.fallthrough();
  app.require_subcommand(1);
  app.add_option("--url", invocation.global.url,
                 "Redis URL (default: $REDLIMIT_URL, else redis://127.0.0.1:6379): "
                 "redis://[[user:]password@]host[:port][/db], rediss://... (TLS), unix:///path, "
                 "redis-sentinel://host:port[,...]#name, rediss-sentinel://... (TLS), "
                 "redis-cluster://host:port[,...]")
      ->envname("REDLIMIT_URL");
  app.add_option("--prefix", invocation.global.prefix, "the key prefix (LimiterOptions::prefix)")
      ->capture_default_str();
  app.add_flag("--json", invocation.global.json, "print JSON (watch: one document per line)");
  app.add_option("--tls-ca", invocation.global.tls.ca_file,
                 "rediss://: the CA file of the server's certificate (default: the system's)");
  app.add_option("--tls-cert", invocation.global.tls.cert_file,
                 "rediss://: this client's certificate, for mutual TLS (with --tls-key)");
  app.add_option("--tls-key", invocation.global.tls.key_file,
                 "rediss://: the private key of --tls-cert");
  app.add_option("--sentinel-password", invocation.global.sentinel_password,
                 "redis-sentinel://: the sentinels' own password (default: "
                 "$REDLIMIT_SENTINEL_PASSWORD)")
      ->envname("REDLIMIT_SENTINEL_PASSWORD");
  app.add_option("--client-id", invocation.global.client_id,
                 "inspect, reset: under a scope per_client policy, the client whose state they "
                 "read (its ClientOptions::id)")
      ->check(client_id_text);
  add_policy_commands(app, invocation.args, invocation);
  add_override_commands(app, invocation.args, invocation);
  add_key_commands(app, invocation.args, invocation);
  add_watch_command(app, invocation.args, invocation);
}

}  // namespace redlimit_cli
