#pragma once
/// @file descriptor_match.hpp
/// Which configured limit a request's descriptor falls under: envoyproxy/ratelimit's matching
/// rules.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rate_limit_config.hpp"

namespace redlimit_server {

/// One entry of a request's descriptor.
struct DescriptorEntry {
  std::string key;
  std::string value;
};

/// The limit a descriptor falls under.
struct MatchedLimit {
  const LimitConfig* limit = nullptr;
};

/// The limit of `domain` a descriptor of `entries` falls under, none when the domain is unknown
/// or no limit is configured at the descriptor's depth. Level by level: the entry's
/// `<key>_<value>`, else a `<key>_<prefix>*` its `<key>_<value>` starts with (the first in the
/// file), else its `<key>` alone; the limit applies only where the last entry lands.
std::optional<MatchedLimit> match_limit(const RateLimitConfig& config, std::string_view domain,
                                        std::span<const DescriptorEntry> entries);

/// Drops, from the limits matched for one request's descriptors, those that another matched
/// limit names in its `replaces` (an unlimited one stays: envoyproxy/ratelimit answers it so).
void apply_replaces(std::vector<std::optional<MatchedLimit>>& matched);

}  // namespace redlimit_server
