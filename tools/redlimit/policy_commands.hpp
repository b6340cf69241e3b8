#pragma once
// `redlimit policy get|set|try-set|remove` and `redlimit override set|remove`: the PolicyStore
// from the command line.

#include <string>

#include "command_runner.hpp"
#include "redlimit/limit.hpp"
#include "redlimit/task.hpp"

namespace redlimit_cli {

/// Prints the policy stored under `name` and its overrides; 1 when no policy is stored.
redlimit::Task<int> policy_get(redlimit::Client& client, GlobalOptions global, std::string name);
/// Stores `policy` under `name`, replacing any; keys' state carries over as `carry` says.
redlimit::Task<int> policy_set(redlimit::Client& client, GlobalOptions global, std::string name,
                               redlimit::Policy policy, redlimit::Carry carry);
/// Stores `policy` under `name` only if none is stored there; 1 when one was.
redlimit::Task<int> policy_try_set(redlimit::Client& client, GlobalOptions global, std::string name,
                                   redlimit::Policy policy);
/// Removes the policy of `name` and its overrides; 1 when nothing was stored.
redlimit::Task<int> policy_remove(redlimit::Client& client, GlobalOptions global, std::string name);
/// Makes `key` of `name` follow `policy` instead of the name's policy.
redlimit::Task<int> override_set(redlimit::Client& client, GlobalOptions global, std::string name,
                                 std::string key, redlimit::Policy policy);
/// Returns `key` to the name's policy; 1 when the key had no override.
redlimit::Task<int> override_remove(redlimit::Client& client, GlobalOptions global,
                                    std::string name, std::string key);

}  // namespace redlimit_cli
