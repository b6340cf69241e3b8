#pragma once
// What a limit's stored state says about the policy it was written under, and what a decision
// says about the policy in force: together they tell an algorithm when, and how, to carry a
// state over to changed parameters (docs/algorithms.md, "Changing a policy").

#include <cstdint>
#include <optional>

#include "redlimit/limit.hpp"

namespace redlimit::detail {

/// The parameters a state was written under (the limit's three script parameters, as LimitSpec
/// has them) and the version field: the version of the stored policy, or, written by a limiter
/// that follows no store (version 0), the reset tag (stamp_rule()).
struct Stamp {
  std::int64_t a = 0;
  std::int64_t b = 0;
  std::int64_t c = 0;
  std::int64_t policy_version = 0;
  friend bool operator==(const Stamp&, const Stamp&) = default;
};

/// The policy in force for a decision, as every algorithm's model takes it.
struct PolicyChange {
  /// The request's policy version: a state stamped with a newer one refuses it (stale). 0 for a
  /// policy given in process.
  std::int64_t policy_version = 0;
  /// When the policy took effect, in microseconds since the epoch, as the request sends it (0:
  /// unknown, use now): a state is carried over at change_time(); a reset of version 0 is
  /// tagged with it as it is (stamp_rule()).
  std::int64_t since_us = 0;
  Carry carry = Carry::as_is;
};

/// When a change takes effect for a decision at `now`: its time, or now when unknown or later
/// (a Redis clock behind the client's that set it).
constexpr std::int64_t change_time(const PolicyChange& change, std::int64_t now) noexcept {
  return change.since_us == 0 || change.since_us > now ? now : change.since_us;
}

/// What a stored state's stamp says to a request (stamp_rule()).
struct StampRule {
  /// The stamp holds a newer policy version than the request's (which follows a store): the
  /// request is refused, nothing is written.
  std::int64_t stale_version = 0;
  /// The state is written under another stamp: written back also when denied (a window
  /// algorithm converts it; a bucket converts it when its parameters differ or `carry` is reset).
  /// False for a state without a stamp: each algorithm says what that becomes.
  bool restamp = false;
  /// The carry a conversion applies.
  Carry carry = Carry::as_is;
  /// The version field of the stamp the state is written with.
  std::int64_t version = 0;
};

/// The stamp rule, as every algorithm applies it to its state; twin of lua/lib/stamp_rule.lua.
/// `stored_version` is the version field of the state's stamp, nullopt when it has none (no
/// state, or a value of the previous release); `other_parameters` says that the stamp's
/// parameters differ from the request's.
///
/// A request that follows a store (policy_version > 0): a newer version is stale; other
/// parameters or another version restamp, with the carry as sent; the stamp holds the request's
/// version. A request that follows no store (version 0): the version field holds a reset tag,
/// the since_us as sent of the last Carry::reset change that reached the state (0: none). A
/// reset is due when the tag is older than the request's since_us: the state is restamped,
/// converted with Carry::reset, and tagged since_us. Otherwise a reset is not applied again (the
/// carry becomes as_is), the state is restamped only when its parameters differ, and the tag is
/// kept, also by writers that never reset: another process of the same name never erases it,
/// so a reset frees permits once per key, whatever Redis's clock says of since_us.
constexpr StampRule stamp_rule(const PolicyChange& change,
                               std::optional<std::int64_t> stored_version,
                               bool other_parameters) noexcept {
  StampRule rule{.restamp = stored_version && other_parameters,
                 .carry = change.carry,
                 .version = change.policy_version};
  if (change.policy_version > 0) {
    if (stored_version && *stored_version > change.policy_version) {
      rule.stale_version = *stored_version;
      rule.restamp = false;
    } else if (stored_version && *stored_version != change.policy_version) {
      rule.restamp = true;
    }
    return rule;
  }
  rule.version = stored_version.value_or(0);
  if (change.carry == Carry::reset) {
    if (rule.version < change.since_us) {
      rule.version = change.since_us;
      rule.restamp = stored_version.has_value();
    } else {
      rule.carry = Carry::as_is;
    }
  }
  return rule;
}

/// The version field of `stamp`, nullopt without a stamp (stamp_rule()'s stored_version).
inline std::optional<std::int64_t> version_field(const std::optional<Stamp>& stamp) noexcept {
  if (!stamp) return std::nullopt;
  return stamp->policy_version;
}

}  // namespace redlimit::detail
