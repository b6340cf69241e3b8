#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "algorithms/policy_model.hpp"
#include "limiter/backend.hpp"

namespace redlimit::detail {

/// Runs the algorithms' C++ models in process, with state per key in memory. Each limit's state
/// expires when it stops mattering (as the script's TTLs do in Redis); expired keys are evicted
/// on every call, so memory is bounded by the keys active within the longest state lifetime.
class LocalBackend final : public Backend {
 public:
  /// Microseconds since the Unix epoch; windows align to it as in Redis.
  using Clock = std::function<std::int64_t()>;

  explicit LocalBackend(Clock clock = system_clock);
  Task<Decision> decide(DecideRequest request) override;
  Task<void> reset(std::shared_ptr<const CompiledPolicy> policy, std::string key_base) override;

  /// The decision, synchronously (decide() wraps this).
  Decision decide_now(const DecideRequest& request);
  /// Keys that hold state.
  std::size_t size() const noexcept { return entries_.size(); }
  static std::int64_t system_clock();

 private:
  struct Slot {
    Algorithm algorithm = Algorithm::gcra;
    std::int64_t expires_us = 0;
  };
  struct Entry {
    std::vector<std::optional<LimitState>> states;
    std::vector<Slot> slots;
    std::multimap<std::int64_t, const std::string*>::iterator expiry;
  };

  void evict_expired(std::int64_t now);

  Clock clock_;
  std::unordered_map<std::string, Entry> entries_;
  std::multimap<std::int64_t, const std::string*> by_expiry_;  ///< entry expiry -> its key
};

}  // namespace redlimit::detail
