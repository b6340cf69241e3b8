#pragma once
/// @file policy_publisher.hpp
/// Writes a configuration's limits to the central policy store, which every replica of the
/// server follows.

#include <string>

#include "rate_limit_config.hpp"
#include "redlimit/client.hpp"
#include "redlimit/task.hpp"

namespace redlimit_server {

/// Stores each enforced limit of `config` (not unlimited, not of 0 requests) under its full key
/// in the PolicyStore of `prefix`, where it differs from what is stored: the replicas' limiters
/// follow it from there, and a key's consumed state carries over (Carry::as_is). Returns how
/// many were written. Redis errors are thrown.
redlimit::Task<int> publish_policies(redlimit::Client& client, const RateLimitConfig& config,
                                     std::string prefix);

}  // namespace redlimit_server
