#pragma once
// What `redlimit policy get` shows: a name's stored policy and overrides.

#include <string>

#include "json_writer.hpp"
#include "redlimit/policy_store.hpp"

namespace redlimit_cli {

/// The policy of `name` (text, version, since, carry) and its overrides, as aligned text.
std::string stored_policies_text(const std::string& name, const redlimit::StoredPolicies& stored);

/// The same as one JSON object: name, version, policy (null when none is stored), overrides
/// and removed_overrides.
void write_stored_policies(JsonWriter& json, const std::string& name,
                           const redlimit::StoredPolicies& stored);

}  // namespace redlimit_cli
