#include "inspect_command.hpp"

#include <algorithm>
#include <vector>

#include "exit_status.hpp"
#include "output.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/policy_store.hpp"
#include "table.hpp"
#include "text_format.hpp"

namespace redlimit_cli {
namespace {

bool all_allow(const std::vector<redlimit::LimitState>& states) {
  return std::all_of(states.begin(), states.end(),
                     [](const redlimit::LimitState& limit) { return limit.state.allowed; });
}

std::int64_t policy_version(const std::vector<redlimit::LimitState>& states) {
  return states.empty() ? 0 : states.front().state.policy_version;
}

std::string states_text(const std::string& name, const std::string& key,
                        const std::vector<redlimit::LimitState>& states) {
  Table table({{"LIMIT"},
               {"REMAINING", true},
               {"CAPACITY", true},
               {"RETRY AFTER", true},
               {"RESET AFTER", true},
               {"TTL", true},
               {"REDIS KEY"}});
  for (const redlimit::LimitState& limit : states) {
    table.add_row({redlimit::to_string(limit.limit), std::to_string(limit.state.remaining),
                   std::to_string(limit.state.limit), format_duration(limit.state.retry_after),
                   format_duration(limit.state.reset_after),
                   limit.ttl ? format_duration(*limit.ttl) : "-", printable(limit.redis_key)});
  }
  const std::string verdict = all_allow(states) ? "allowed" : "denied";
  return render_fields({{"name", printable(name)},
                        {"key", printable(key)},
                        {"policy version", std::to_string(policy_version(states))},
                        {"next request", verdict}}) +
         "\n" + table.render();
}

void print_states_json(const std::string& name, const std::string& key,
                       const std::vector<redlimit::LimitState>& states) {
  JsonWriter json;
  json.begin_object();
  json.key("name").string(name);
  json.key("key").string(key);
  json.key("policy_version").integer(policy_version(states));
  json.key("allowed").boolean(all_allow(states));
  json.key("limits").begin_array();
  for (const redlimit::LimitState& limit : states) {
    json.begin_object();
    json.key("limit").string(redlimit::to_string(limit.limit));
    json.key("algorithm").string(redlimit::to_string(limit.limit.algorithm));
    json.key("allowed").boolean(limit.state.allowed);
    json.key("remaining").integer(limit.state.remaining);
    json.key("capacity").integer(limit.state.limit);
    json.key("retry_after_us").integer(limit.state.retry_after.count());
    json.key("reset_after_us").integer(limit.state.reset_after.count());
    json.key("ttl_ms");
    if (limit.ttl) {
      json.integer(limit.ttl->count());
    } else {
      json.null();
    }
    json.key("redis_key").string(limit.redis_key);
    json.end_object();
  }
  json.end_array();
  json.end_object();
  print_json(json);
}

/// Whether `key` of `name` is under a per_client policy (each client its own state) while no
/// --client-id says whose state to read: the command's own is always full.
redlimit::Task<bool> needs_client_id(redlimit::Client& client, const GlobalOptions& global,
                                     const std::string& name, const std::string& key) {
  if (!global.client_id.empty()) co_return false;
  redlimit::PolicyStore store(client, global.prefix);
  const redlimit::StoredPolicies stored = co_await store.read(name);
  const auto override_of_key = stored.overrides.find(key);
  const std::optional<redlimit::PolicyRecord>& named = stored.policy;
  const redlimit::Policy* policy = override_of_key != stored.overrides.end()
                                       ? &override_of_key->second.policy
                                       : (named ? &named->policy : nullptr);
  if (policy == nullptr || policy->scope != redlimit::Scope::per_client) co_return false;
  print_error("the policy of " + printable(name) +
              " is scope per_client: each client has its own state of a key; name the client "
              "with --client-id (its ClientOptions::id)");
  co_return true;
}

}  // namespace

redlimit::Task<int> inspect_key(redlimit::Client& client, GlobalOptions global, std::string name,
                                std::string key) {
  if (co_await needs_client_id(client, global, name, key)) co_return exit_usage;
  redlimit::Limiter limiter(client,
                            redlimit::LimiterOptions{.name = name, .prefix = global.prefix});
  const std::vector<redlimit::LimitState> states = co_await limiter.inspect(key);
  if (global.json) {
    print_states_json(name, key, states);
  } else {
    print_out(states_text(name, key, states));
  }
  co_return all_allow(states) ? exit_ok : exit_not_found;
}

redlimit::Task<int> reset_key(redlimit::Client& client, GlobalOptions global, std::string name,
                              std::string key) {
  if (co_await needs_client_id(client, global, name, key)) co_return exit_usage;
  redlimit::Limiter limiter(client,
                            redlimit::LimiterOptions{.name = name, .prefix = global.prefix});
  co_await limiter.reset(key);
  if (global.json) {
    JsonWriter json;
    json.begin_object().key("name").string(name).key("key").string(key);
    json.key("reset").boolean(true).end_object();
    print_json(json);
  } else {
    print_out("reset " + printable(key) + " of " + printable(name) + ": it starts again full\n");
  }
  co_return exit_ok;
}

}  // namespace redlimit_cli
