#pragma once
/// @file proto_translation.hpp
/// Envoy's RateLimitRequest and RateLimitResponse messages to and from the plain values the
/// Decider takes and gives.

#include "rate_limit_call.hpp"
#include "rls.pb.h"

namespace redlimit_server {

/// The call `request` makes. Throws InvalidCall for a limit override of an unknown unit.
RateLimitCall call_from(const envoy::service::ratelimit::v3::RateLimitRequest& request);

/// Writes `answer` into `response`.
void fill(envoy::service::ratelimit::v3::RateLimitResponse& response,
          const RateLimitAnswer& answer);

}  // namespace redlimit_server
