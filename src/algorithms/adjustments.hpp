#pragma once
// The C++ model of the adjust script (lua/shapes/adjust.lua and every algorithm's adjust
// section): refund, penalize or block one key under every limit of its policy, all or nothing.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "algorithms/policy_model.hpp"

namespace redlimit::detail {

/// What an adjustment does to a key (Limiter::refund, penalize, block). give_back returns what a
/// take of n permits at a known time still holds (a decision over claims across a cluster's
/// slots gives back the slots that took when another denied): never more than exact.
enum class Adjustment { refund, give_back, penalize, block };

/// The adjust script's name for `adjustment` (its ARGV[1]).
const char* adjustment_name(Adjustment adjustment) noexcept;

struct AdjustOutcome {
  bool applied = false;
  /// A limit's state was written under a newer policy version: refused, nothing written.
  std::int64_t stale_version = 0;
  /// Not applied, not stale: the limit that refused it, and why (a window that does not hold
  /// the permits refunded, or an algorithm that cannot block).
  std::size_t refused_limit = 0;
  std::string refusal;
  std::int64_t now_us = 0;
  /// Applied: per limit, how long its new state matters (its TTL in Redis); none when it wrote
  /// nothing.
  std::vector<std::optional<std::int64_t>> ttl_us;
};

/// Applies `adjustment` at `now` to every limit's state, as the adjust script does: `amount` is
/// the permits (refund, give_back, penalize; at most the smallest capacity) or the block's
/// duration in microseconds; `taken_at` is give_back's time of the take, and `reset_at` the
/// time of the key's latest reset, if it has one (lua/reset.lua's mark): a give_back of a take
/// made then or before applies as nothing, since the reset gave everything back. Every limit is
/// checked first; the states are written only when every limit applies it. `states[i]` belongs
/// to `limits[i]`, as for decide_policy().
AdjustOutcome adjust_policy(std::span<const LimitSpec> limits,
                            std::span<std::optional<LimitState>> states, std::int64_t now,
                            Adjustment adjustment, std::int64_t amount, PolicyChange change = {},
                            std::int64_t taken_at = 0,
                            std::optional<std::int64_t> reset_at = std::nullopt);

}  // namespace redlimit::detail
