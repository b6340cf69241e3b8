#pragma once
/// The records a PolicyStore keeps in Redis (lua/policy_store.lua), for the store and followers.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "redis/command_dispatcher.hpp"
#include "redlimit/policy_store.hpp"

namespace redlimit::detail {

/// `<prefix>:policy:{<escaped name>}`: the hash of the name's policy.
std::string policy_record_key(std::string_view prefix, std::string_view name);
/// The channel a change of the name's record is published on.
std::string policy_channel(std::string_view record_key);
/// Runs lua/policy_store.lua's `operation` on the name's record with the two arguments after it,
/// by `deadline` (none: the client's command timeout from now).
/// Why shared: a follower's reads may outlive the Limiter that started them.
Task<Reply> run_policy_script(
    std::shared_ptr<CommandDispatcher> redis, std::string record_key, std::string operation,
    std::string first, std::string second,
    std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);
/// Everything stored under the name of `record_key`, at once.
Task<StoredPolicies> read_policies(std::shared_ptr<CommandDispatcher> redis,
                                   std::string record_key);
/// What advance_policies() did.
struct Advanced {
  bool done = false;         ///< false: the key's version was already at least the floor
  std::int64_t version = 0;  ///< the name's version after it
};
/// Has the store give raw key `key`'s policy a version above `floor` (it lost changes), by
/// `deadline`: every record of the name moves to one new version (unless the key's version was
/// already at least `floor`: another process advanced it).
Task<Advanced> advance_policies(std::shared_ptr<CommandDispatcher> redis, std::string record_key,
                                std::string key, std::int64_t floor,
                                std::chrono::steady_clock::time_point deadline);

}  // namespace redlimit::detail
