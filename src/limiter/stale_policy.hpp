#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace redlimit::detail {

/// A script refused a request: a key it touches was already written under a newer version of
/// the stored policy than the request's. Thrown by the Redis backend; a limiter that follows a
/// PolicyStore reads the policy again and asks once more. Never reaches a caller.
class StalePolicy : public std::runtime_error {
 public:
  explicit StalePolicy(std::int64_t stored_version, std::size_t claim = 0)
      : std::runtime_error("a key holds state of policy version " + std::to_string(stored_version) +
                           ", newer than the request's"),
        stored_version_(stored_version),
        claim_(claim) {}
  /// The version the key's state was written under.
  std::int64_t stored_version() const noexcept { return stored_version_; }
  /// Of a decision over several claims (try_acquire_all()): the claim refused.
  std::size_t claim() const noexcept { return claim_; }

 private:
  std::int64_t stored_version_;
  std::size_t claim_;
};

}  // namespace redlimit::detail
