#pragma once
/// @file ratelimit_fields.hpp
/// The RateLimit-Policy and RateLimit header fields of draft-ietf-httpapi-ratelimit-headers-10
/// ("RateLimit header fields for HTTP", R. Polli, A. Martinez, D. Miller, 27 September 2025,
/// https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/10/), written from a
/// redlimit Policy and Decision.
///
/// Syntax (draft §3 and §4; Structured Fields, RFC 9651): each field is a List of Items, the
/// members separated by ", "; each Item is a String naming a quota policy, with parameters.
///   RateLimit-Policy: "daily";q=1000;w=86400, "rate";q=10;w=1
///     q: the quota, an Integer (required); w: the time window, an Integer of seconds > 0.
///   RateLimit: "rate";r=9;t=1;pk=:3AhcFHiq6+M=:
///     r: the remaining quota, an Integer (required); t: seconds until quota is made available
///     again, an Integer; pk: the partition key, a Byte Sequence (base64 between colons).
///
/// How a Decision maps onto them:
/// - RateLimit-Policy lists every limit of the Policy, in order, and is the same on every
///   response: q is rate.permits and w rate.period. The gateway's limits have burst = permits,
///   so q is also the capacity that Decision::limit reports.
/// - RateLimit names one policy, the binding limit (Decision::binding): the one that denied
///   (the longest retry), or on an admission the one with the fewest permits left, i.e. the
///   closest to exhaustion, as in the draft's examples B.1.2 and B.3.2. A Decision says
///   nothing about the other limits, so they are not listed.
/// - r is Decision::remaining.
/// - t, in whole seconds rounded up: when admitted, Decision::reset_after, the time until the
///   binding limit has all of q again (for fixed_window the window's end); when denied,
///   Decision::retry_after, the time until quota for this request is available, which is also
///   the Retry-After value (the draft §6 says Retry-After should not be earlier than t).
/// - A fail_closed or fail_open decision (Redis did not answer) knows nothing of the
///   partition's state: the response has no RateLimit field (r=0 would tell the client that its
///   quota is used up), only RateLimit-Policy and, on the 503, Retry-After from retry_after.
/// - pk identifies the partition (`key:<X-API-Key>` or `ip:<client address>`) by its 64-bit
///   FNV-1a digest, big-endian, so that the field never carries the API key itself (draft §6.1).
///   A deployment would use a keyed digest (HMAC) instead.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/limit.hpp"

namespace http_gateway {

/// One limit as RateLimit-Policy describes it: a named quota policy.
struct QuotaPolicy {
  std::string name;         ///< the Item's String, e.g. "rate"
  std::int64_t quota = 0;   ///< q
  std::int64_t window = 0;  ///< w, in seconds
};

/// Describes `limit` (burst 0, i.e. burst = permits) as the quota policy `name`. Throws
/// std::invalid_argument when its period is not a whole number of seconds, which w cannot
/// express (draft §3.1.3), or when `name` is not printable ASCII.
QuotaPolicy describe(std::string name, const redlimit::Limit& limit);

/// The RateLimit-Policy field value listing `quotas`.
std::string policy_field(const std::vector<QuotaPolicy>& quotas);

/// The RateLimit field value for `decision`, whose binding limit is `binding`, taken for
/// `partition`.
std::string limit_field(const QuotaPolicy& binding, const redlimit::Decision& decision,
                        std::string_view partition);

/// `duration` in whole seconds, rounded up, and 0 if negative: delay-seconds for Retry-After
/// and t.
std::int64_t whole_seconds_up(std::chrono::microseconds duration);

/// The pk parameter for `partition`: its FNV-1a 64-bit digest as a Byte Sequence.
std::string partition_key(std::string_view partition);

}  // namespace http_gateway
