#pragma once
/// @file ratelimit_fields.hpp
/// The HTTP response header fields that tell a client where it stands after a Decision: the
/// RateLimit-Policy and RateLimit fields of draft-ietf-httpapi-ratelimit-headers-10
/// ("RateLimit header fields for HTTP", 27 September 2025), Retry-After, and, on request, the
/// X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset fields many APIs send.
///
/// Syntax (draft §3 and §4; Structured Fields, RFC 9651): each field is a List of Items, the
/// members separated by ", "; each Item is a String naming a quota policy, with parameters.
///   RateLimit-Policy: "daily";q=1000;w=86400, "rate";q=10;w=1
///   RateLimit: "rate";r=9;t=1;pk=:3AhcFHiq6+M=:
///
/// How a Policy and a Decision map onto them:
/// - RateLimit-Policy lists every limit of the Policy, in order: q is the limit's permits over
///   a window of w whole seconds: rate.permits and rate.period ("100/min" is q=100;w=60), or,
///   for a period that is not whole seconds, the rate over the shortest whole number of seconds
///   that holds a whole number of permits ("5/250ms" is q=20;w=1).
/// - RateLimit names the binding limit (Decision::binding): the one that denied, or on an
///   admission the one with the fewest permits left. r is Decision::remaining; t, in whole
///   seconds rounded up, is Decision::reset_after when admitted and Decision::retry_after when
///   denied; pk, when a partition is given, identifies it by its 64-bit FNV-1a digest
///   (big-endian, as a Byte Sequence), so the field never carries the partition itself. For a
///   partition that can be guessed (an IP address), pass a keyed digest of it instead.
/// - A decision the failure policy made (Source::fail_open, Source::fail_closed: Redis did
///   not answer) knows nothing of the quota: it gets no RateLimit field (r=0 would tell the
///   client its quota is used up), only RateLimit-Policy and, when denied, Retry-After.

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/limit.hpp"

namespace redlimit {

/// One HTTP header field.
struct HeaderField {
  std::string name;
  std::string value;

  friend bool operator==(const HeaderField&, const HeaderField&) = default;
};

/// One limit as RateLimit-Policy describes it: a named quota policy.
struct QuotaPolicy {
  std::string name;                 ///< the Item's String, e.g. "rate"
  std::int64_t quota = 0;           ///< q
  std::int64_t window_seconds = 0;  ///< w

  friend bool operator==(const QuotaPolicy&, const QuotaPolicy&) = default;
};

/// What ratelimit_fields() writes besides RateLimit-Policy and RateLimit.
struct RateLimitFieldOptions {
  /// The quota policy name of each limit, in Policy::limits order; a limit without one is
  /// named by its rate, e.g. "100/1min".
  std::vector<std::string> names{};
  /// The partition the decision was taken for (an API key, a user): RateLimit's pk. Empty: no
  /// pk.
  std::string partition{};
  /// Also X-RateLimit-Limit (the binding limit's q), X-RateLimit-Remaining (r) and
  /// X-RateLimit-Reset (t), as integers.
  bool x_ratelimit = false;
};

/// `limit` as the quota policy `name`. Throws InvalidArgument when `name` is not printable
/// ASCII, or when no window of whole seconds up to about 31 years holds a whole number of its
/// permits.
QuotaPolicy quota_policy(std::string name, const Limit& limit);

/// The RateLimit-Policy field value listing `quotas`, in order.
std::string ratelimit_policy_field(std::span<const QuotaPolicy> quotas);

/// The RateLimit field value for `decision`, whose binding limit is `binding`; with pk when
/// `partition` is not empty.
std::string ratelimit_field(const QuotaPolicy& binding, const Decision& decision,
                            std::string_view partition = {});

/// Every field for a response after `decision` under `policy` (see the file's comment):
/// RateLimit-Policy; RateLimit unless the failure policy answered; Retry-After when denied;
/// the X-RateLimit fields when asked. Throws InvalidArgument as quota_policy() does, or when
/// the decision's binding limit is not one of the policy's.
std::vector<HeaderField> ratelimit_fields(const Policy& policy, const Decision& decision,
                                          const RateLimitFieldOptions& options = {});

/// ratelimit_fields() for limits already described as quota policies, in Policy::limits order
/// (options.names is not used): what a caller that keeps them (quota_policy() once per limit)
/// calls per response. Throws InvalidArgument when the decision's binding limit is not one of
/// `quotas`.
std::vector<HeaderField> ratelimit_fields(std::span<const QuotaPolicy> quotas,
                                          const Decision& decision,
                                          const RateLimitFieldOptions& options = {});

/// `duration` in whole seconds, rounded up, and 0 if negative: delay-seconds, as Retry-After
/// and t take them.
std::int64_t whole_seconds_up(std::chrono::microseconds duration);

}  // namespace redlimit
