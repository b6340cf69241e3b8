#pragma once
// `redlimit inspect NAME KEY` and `redlimit reset NAME KEY`: one key of a limiter that follows
// the stored policy.

#include <string>

#include "command_runner.hpp"
#include "redlimit/task.hpp"

namespace redlimit_cli {

/// Prints every limit's state for `key` of `name` (remaining, retry_after, reset_after, TTL),
/// consuming nothing; 1 when the key's next one-permit request would be denied.
redlimit::Task<int> inspect_key(redlimit::Client& client, GlobalOptions global, std::string name,
                                std::string key);
/// Forgets the state of `key` of `name`: it starts again full.
redlimit::Task<int> reset_key(redlimit::Client& client, GlobalOptions global, std::string name,
                              std::string key);

}  // namespace redlimit_cli
