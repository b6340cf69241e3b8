#include "redlimit/policy_store.hpp"

#include "policy/compiled_policy.hpp"
#include "policy/policy_records.hpp"
#include "policy/validation.hpp"
#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"

namespace redlimit {
namespace {

/// The text form of `policy` once it is known to be one a Limiter accepts.
std::string validated_text(const Policy& policy) {
  (void)detail::CompiledPolicy::compile(policy);
  return to_string(policy);
}

[[noreturn]] void throw_scope_change(const std::string& name) {
  throw InvalidArgument("the policy would change the scope of the policies stored under '" + name +
                        "': every key starts afresh under another scope (its keys are other "
                        "keys), so that change is made only with Carry::reset, and only once "
                        "no override of the other scope remains");
}

/// The script's argument for `carry`: "0" as_is, "1" proportional, "2" reset.
std::string carry_argument(Carry carry) {
  const int value = static_cast<int>(carry);
  if (value < 0 || value > 2) throw InvalidArgument("carry must be as_is, proportional or reset");
  return std::to_string(value);
}

/// Runs the policy script's `operation` on the record of `name` under `prefix`.
Task<Reply> run_script(const Client& client, std::string_view prefix, std::string_view name,
                       std::string operation, std::string first, std::string second) {
  return detail::run_policy_script(client.shared_dispatcher(),
                                   detail::policy_record_key(prefix, name), std::move(operation),
                                   std::move(first), std::move(second));
}

}  // namespace

PolicyStore::PolicyStore(Client& client, std::string prefix)
    : client_(&client), prefix_(std::move(prefix)) {
  detail::check_prefix("PolicyStore prefix", prefix_);
}

Task<bool> PolicyStore::try_set(std::string name, Policy policy) {
  detail::check_name("PolicyStore name", name);
  std::string text = validated_text(policy);
  const Reply reply = co_await run_script(*client_, prefix_, name, "try_set", std::move(text), "");
  if (reply.as_array().at(0).as_integer() == -1) throw_scope_change(name);
  co_return reply.as_array().at(0).as_integer() == 1;
}

Task<void> PolicyStore::set(std::string name, Policy policy, Carry carry) {
  detail::check_name("PolicyStore name", name);
  std::string text = validated_text(policy);
  const Reply reply =
      co_await run_script(*client_, prefix_, name, "set", std::move(text), carry_argument(carry));
  if (reply.as_array().at(0).as_integer() == -1) throw_scope_change(name);
}

Task<std::optional<Policy>> PolicyStore::get(std::string name) {
  std::optional<PolicyRecord> stored = co_await record(std::move(name));
  if (!stored) co_return std::nullopt;
  co_return std::move(stored->policy);
}

Task<std::optional<PolicyRecord>> PolicyStore::record(std::string name) {
  StoredPolicies stored = co_await read(std::move(name));
  co_return std::move(stored.policy);
}

Task<StoredPolicies> PolicyStore::read(std::string name) {
  detail::check_name("PolicyStore name", name);
  co_return co_await detail::read_policies(client_->shared_dispatcher(),
                                           detail::policy_record_key(prefix_, name));
}

Task<void> PolicyStore::set_override(std::string name, std::string key, Policy policy) {
  detail::check_name("PolicyStore name", name);
  detail::check_key(key);
  std::string text = validated_text(policy);
  const Reply reply =
      co_await run_script(*client_, prefix_, name, "set_override", std::move(text), std::move(key));
  if (reply.as_array().at(0).as_integer() == -1) throw_scope_change(name);
}

Task<void> PolicyStore::remove_override(std::string name, std::string key) {
  detail::check_name("PolicyStore name", name);
  detail::check_key(key);
  co_await run_script(*client_, prefix_, name, "remove_override", "", std::move(key));
}

Task<void> PolicyStore::remove(std::string name) {
  detail::check_name("PolicyStore name", name);
  co_await run_script(*client_, prefix_, name, "remove", "", "");
}

}  // namespace redlimit
