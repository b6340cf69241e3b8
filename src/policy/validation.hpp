#pragma once
/// The checks Limiter and Semaphore apply to their names and to each call's arguments.

#include <chrono>
#include <cstdint>
#include <string_view>

#include "redlimit/limiter.hpp"

namespace redlimit::detail {

/// `name`: 1 to 128 bytes. Throws InvalidArgument naming `field` ("LimiterOptions::name").
void check_name(std::string_view field, std::string_view name);
/// `prefix`: 1 to 64 characters from [A-Za-z0-9_.-]. Throws InvalidArgument naming `field`.
void check_prefix(std::string_view field, std::string_view prefix);
/// `policy.local_share` in (0, 1]. Throws InvalidArgument naming `field`.
void check_failure_policy(std::string_view field, const FailurePolicy& policy);
/// A call's key: 1 to max_key_bytes bytes. Throws InvalidArgument.
void check_key(std::string_view key);
/// A call's permits: in [1, capacity]; `holder` names what holds at most `capacity` (a limit, a
/// semaphore). Throws InvalidArgument.
void check_permits(std::int64_t permits, std::int64_t capacity, std::string_view holder);
/// AcquireOptions::max_wait: not negative. Throws InvalidArgument.
void check_max_wait(std::chrono::microseconds max_wait);
/// AcquireOptions::max_lateness must be positive; throws InvalidArgument.
void check_max_lateness(std::chrono::microseconds max_lateness);

}  // namespace redlimit::detail
