#pragma once
/// The records a PolicyStore keeps in Redis (lua/policy_store.lua), for the store and followers.

#include <memory>
#include <string>
#include <string_view>

#include "redis/command_dispatcher.hpp"
#include "redlimit/policy_store.hpp"

namespace redlimit::detail {

/// `<prefix>:policy:{<escaped name>}`: the hash of the name's policy.
std::string policy_record_key(std::string_view prefix, std::string_view name);
/// The channel a change of the name's record is published on.
std::string policy_channel(std::string_view record_key);
/// Runs lua/policy_store.lua's `operation` on the name's record with the two arguments after it.
/// Why shared: a follower's reads may outlive the Limiter that started them.
Task<Reply> run_policy_script(std::shared_ptr<CommandDispatcher> redis, std::string record_key,
                              std::string operation, std::string first, std::string second);
/// Everything stored under the name of `record_key`, at once.
Task<StoredPolicies> read_policies(std::shared_ptr<CommandDispatcher> redis,
                                   std::string record_key);
/// Has the store give raw key `key`'s policy a version above `floor` (it lost changes): every
/// record of the name moves to one new version; returns it, or 0 when the key's version was
/// already at least `floor` (another process advanced it).
Task<std::int64_t> advance_policies(std::shared_ptr<CommandDispatcher> redis,
                                    std::string record_key, std::string key, std::int64_t floor);

}  // namespace redlimit::detail
