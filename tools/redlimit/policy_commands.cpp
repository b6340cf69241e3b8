#include "policy_commands.hpp"

#include "exit_status.hpp"
#include "output.hpp"
#include "policy_report.hpp"
#include "redlimit/policy_store.hpp"
#include "text_format.hpp"

namespace redlimit_cli {
namespace {

/// {"name": name, <outcome>: done} and what `policy` became, when there is one.
void print_outcome_json(const std::string& name, const std::string* key, const char* outcome,
                        bool done, const redlimit::Policy* policy) {
  JsonWriter json;
  json.begin_object();
  json.key("name").string(name);
  if (key != nullptr) json.key("key").string(*key);
  json.key(outcome).boolean(done);
  if (policy != nullptr) json.key("policy").string(redlimit::to_string(*policy));
  json.end_object();
  print_json(json);
}

}  // namespace

redlimit::Task<int> policy_get(redlimit::Client& client, GlobalOptions global, std::string name) {
  redlimit::PolicyStore store(client, global.prefix);
  const redlimit::StoredPolicies stored = co_await store.read(name);
  if (global.json) {
    JsonWriter json;
    write_stored_policies(json, name, stored);
    print_json(json);
  } else {
    print_out(stored_policies_text(name, stored));
  }
  if (!stored.policy) {
    print_error("no policy is stored under " + printable(name));
    co_return exit_not_found;
  }
  co_return exit_ok;
}

redlimit::Task<int> policy_set(redlimit::Client& client, GlobalOptions global, std::string name,
                               redlimit::Policy policy, redlimit::Carry carry) {
  redlimit::PolicyStore store(client, global.prefix);
  co_await store.set(name, policy, carry);
  if (global.json) {
    print_outcome_json(name, nullptr, "stored", true, &policy);
  } else {
    print_out("stored the policy of " + printable(name) + ": " + redlimit::to_string(policy) +
              " (carry " + std::string(carry_name(carry)) + ")\n");
  }
  co_return exit_ok;
}

redlimit::Task<int> policy_try_set(redlimit::Client& client, GlobalOptions global, std::string name,
                                   redlimit::Policy policy) {
  redlimit::PolicyStore store(client, global.prefix);
  const bool stored = co_await store.try_set(name, policy);
  if (global.json) {
    print_outcome_json(name, nullptr, "stored", stored, stored ? &policy : nullptr);
  } else if (stored) {
    print_out("stored the policy of " + printable(name) + ": " + redlimit::to_string(policy) +
              "\n");
  }
  if (!stored) {
    print_error("not stored: " + printable(name) +
                " already has a policy (`policy set` replaces it)");
    co_return exit_not_found;
  }
  co_return exit_ok;
}

redlimit::Task<int> policy_remove(redlimit::Client& client, GlobalOptions global,
                                  std::string name) {
  redlimit::PolicyStore store(client, global.prefix);
  // Why read first: a removal of nothing would still make a new version and notify every
  // follower; and the exit status tells whether there was anything to remove.
  const redlimit::StoredPolicies stored = co_await store.read(name);
  const bool found = stored.policy || !stored.overrides.empty();
  if (found) co_await store.remove(name);
  if (global.json) {
    print_outcome_json(name, nullptr, "removed", found, nullptr);
  } else if (found) {
    print_out("removed the policy and overrides of " + printable(name) + "\n");
  }
  if (!found) {
    print_error("nothing is stored under " + printable(name));
    co_return exit_not_found;
  }
  co_return exit_ok;
}

redlimit::Task<int> override_set(redlimit::Client& client, GlobalOptions global, std::string name,
                                 std::string key, redlimit::Policy policy) {
  redlimit::PolicyStore store(client, global.prefix);
  co_await store.set_override(name, key, policy);
  if (global.json) {
    print_outcome_json(name, &key, "stored", true, &policy);
  } else {
    print_out("stored the override of " + printable(name) + " for key " + printable(key) + ": " +
              redlimit::to_string(policy) + "\n");
  }
  co_return exit_ok;
}

redlimit::Task<int> override_remove(redlimit::Client& client, GlobalOptions global,
                                    std::string name, std::string key) {
  redlimit::PolicyStore store(client, global.prefix);
  // Why read first: as for policy_remove.
  const redlimit::StoredPolicies stored = co_await store.read(name);
  const bool found = stored.overrides.contains(key);
  if (found) co_await store.remove_override(name, key);
  if (global.json) {
    print_outcome_json(name, &key, "removed", found, nullptr);
  } else if (found) {
    print_out("removed the override of " + printable(name) + " for key " + printable(key) + "\n");
  }
  if (!found) {
    print_error(printable(name) + " has no override for key " + printable(key));
    co_return exit_not_found;
  }
  co_return exit_ok;
}

}  // namespace redlimit_cli
