#pragma once

#include <exception>
#include <optional>

#include "redlimit/metrics.hpp"

namespace redlimit::detail {

struct RedisMetrics;

/// What `error`, with which a Redis command or script call failed, counts as in
/// RedisStats::errors; nullopt for an error that is not Redis's to count (UsageError on a closed
/// client, InvalidArgument, Cancelled, ...).
std::optional<RedisError> redis_error_of(const std::exception_ptr& error) noexcept;

/// Counts `error` in `metrics` (RedisMetrics::errors), unless redis_error_of() says nullopt.
void count_redis_error(RedisMetrics& metrics, const std::exception_ptr& error) noexcept;

}  // namespace redlimit::detail
