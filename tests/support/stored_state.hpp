#pragma once
// The text Redis stores for a limit's state, made from the C++ model's state, so that the
// differential tests compare what the scripts store with what the model holds.

#include <optional>
#include <string>

#include "algorithms/policy_model.hpp"
#include "redlimit/reply.hpp"

namespace redlimit::test {

/// The value lua/lib/frac_time_value.lua or lua/lib/tokens_value.lua stores for a bucket state,
/// or lua/algorithms/fixed_window.lua or sliding_window_counter.lua for theirs (nullopt for the
/// log, a sorted set, which this does not compare).
std::optional<std::string> stored_value(const detail::LimitState& state);

/// What lua/algorithms/sliding_window_log.lua stores for a log, as "stamp:<limit>:<window>:<pv>"
/// (when stamped) and the entries' times, separated by spaces; nullopt when there is none.
std::optional<std::string> stored_log(const detail::LimitState& state);

/// The same from the sorted set's members and scores (ZRANGE ... WITHSCORES).
std::optional<std::string> stored_log(const Reply& reply);

}  // namespace redlimit::test
