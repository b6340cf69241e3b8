#pragma once
/// @file rate_limit_call.hpp
/// One ShouldRateLimit call and its answer, as plain values: what the gRPC and the JSON forms
/// both carry (envoy.service.ratelimit.v3's RateLimitRequest and RateLimitResponse).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "descriptor_match.hpp"
#include "rate_limit_config.hpp"

namespace redlimit_server {

/// A limit given by the caller for one descriptor instead of the configured one.
struct LimitOverride {
  std::uint32_t requests_per_unit = 0;
  TimeUnit unit = TimeUnit::second;
};

/// One descriptor of a call.
struct DescriptorCall {
  std::vector<DescriptorEntry> entries;
  std::optional<LimitOverride> limit;
  std::optional<std::uint64_t> hits_addend;  ///< else the call's
};

/// One call: a domain and its descriptors.
struct RateLimitCall {
  std::string domain;
  std::vector<DescriptorCall> descriptors;
  std::uint32_t hits_addend = 0;  ///< 0: 1
};

enum class Code { unknown = 0, ok = 1, over_limit = 2 };

/// The limit a descriptor was decided under, as Envoy's RateLimitResponse.RateLimit tells it.
struct CurrentLimit {
  std::string name;
  std::uint32_t requests_per_unit = 0;
  TimeUnit unit = TimeUnit::second;
};

/// One descriptor's answer, in the call's order.
struct DescriptorStatus {
  Code code = Code::ok;
  std::optional<CurrentLimit> current_limit;  ///< none: no limit applies (or an unlimited one)
  std::uint32_t limit_remaining = 0;
  std::chrono::microseconds duration_until_reset{0};
};

/// One HTTP header to add to the response the caller sends.
struct AddedHeader {
  std::string key;
  std::string value;
};

/// The answer to a call.
struct RateLimitAnswer {
  Code overall_code = Code::ok;
  std::vector<DescriptorStatus> statuses;
  std::vector<AddedHeader> response_headers_to_add;
};

}  // namespace redlimit_server
