#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace redlimit::detail {

/// A script refused a request: a key it touches was already written under a newer version of
/// the stored policy than the request's. Thrown by the Redis backend; a limiter that follows a
/// PolicyStore reads the policy again and asks once more. Never reaches a caller.
class StalePolicy : public std::runtime_error {
 public:
  explicit StalePolicy(std::int64_t stored_version)
      : std::runtime_error("a key holds state of policy version " +
                           std::to_string(stored_version) + ", newer than the request's"),
        stored_version_(stored_version) {}
  /// The version the key's state was written under.
  std::int64_t stored_version() const noexcept { return stored_version_; }

 private:
  std::int64_t stored_version_;
};

}  // namespace redlimit::detail
