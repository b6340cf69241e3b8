#include "policy/validation.hpp"

#include <string>

#include "policy/key_format.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/redis_keys.hpp"

namespace redlimit::detail {

void check_name(std::string_view field, std::string_view name) {
  if (!redlimit::is_valid_name(name)) {
    throw InvalidArgument(std::string(field) + " must be 1 to " + std::to_string(max_name_bytes) +
                          " bytes, got " + std::to_string(name.size()));
  }
}

void check_prefix(std::string_view field, std::string_view prefix) {
  if (!is_valid_prefix(prefix)) {
    throw InvalidArgument(std::string(field) +
                          " must be 1 to 64 characters from [A-Za-z0-9_.-], got '" +
                          std::string(prefix) + "'");
  }
}

void check_failure_policy(std::string_view field, const FailurePolicy& policy) {
  if (!(policy.local_share > 0.0 && policy.local_share <= 1.0)) {
    throw InvalidArgument(std::string(field) + ".local_share must be in (0, 1]");
  }
}

void check_key(std::string_view key) {
  if (key.empty()) throw InvalidArgument("key must not be empty");
  if (key.size() > max_key_bytes) {
    throw InvalidArgument("key must be at most " + std::to_string(max_key_bytes) + " bytes, got " +
                          std::to_string(key.size()));
  }
}

void check_permits(std::int64_t permits, std::int64_t capacity, std::string_view holder) {
  if (permits < 1) {
    throw InvalidArgument("permits must be at least 1, got " + std::to_string(permits));
  }
  if (permits > capacity) {
    throw InvalidArgument("permits (" + std::to_string(permits) + ") can never be granted: " +
                          std::string(holder) + " holds at most " + std::to_string(capacity));
  }
}

void check_max_wait(std::chrono::microseconds max_wait) {
  if (max_wait.count() < 0) {
    throw InvalidArgument("AcquireOptions::max_wait must not be negative, got " +
                          std::to_string(max_wait.count()) + " us");
  }
}

void check_max_lateness(std::chrono::microseconds max_lateness) {
  if (max_lateness.count() <= 0) {
    throw InvalidArgument("AcquireOptions::max_lateness must be positive, got " +
                          std::to_string(max_lateness.count()) + " us");
  }
}

}  // namespace redlimit::detail
