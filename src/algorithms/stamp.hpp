#pragma once
// What a limit's stored state says about the policy it was written under, and what a decision
// says about the policy in force: together they tell an algorithm when, and how, to carry a
// state over to changed parameters (docs/algorithms.md, "Changing a policy").

#include <cstdint>

#include "redlimit/limit.hpp"

namespace redlimit::detail {

/// The parameters a state was written under (the limit's three script parameters, as LimitSpec
/// has them) and the version of the stored policy (0 for a policy given in process).
struct Stamp {
  std::int64_t a = 0;
  std::int64_t b = 0;
  std::int64_t c = 0;
  std::int64_t policy_version = 0;
  friend bool operator==(const Stamp&, const Stamp&) = default;
};

/// The policy in force for a decision, as every algorithm's model takes it.
struct PolicyChange {
  /// The request's policy version: a state stamped with a newer one refuses it (stale).
  std::int64_t policy_version = 0;
  /// When the policy took effect, in microseconds since the epoch (0: unknown, use now): a state
  /// stamped with other parameters is carried over at min(since_us, now).
  std::int64_t since_us = 0;
  Carry carry = Carry::as_is;
};

}  // namespace redlimit::detail
