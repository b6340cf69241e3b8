#pragma once
/// @file gateway.hpp
/// Gateway: the application behind the HTTP glue, rate limiting every request.

#include <string>
#include <vector>

#include "http_message.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/metrics.hpp"
#include "redlimit/ratelimit_fields.hpp"

namespace http_gateway {

using redlimit::QuotaPolicy;

/// Limits each request per API key (X-API-Key) or, without one, per client IP, and (when given
/// a global limiter) for the whole service too, as one decision: a request the global limit
/// denies spends nothing of its key's quota (redlimit::try_acquire_all). It answers:
/// 200 when allowed; 429 with Retry-After when denied; 503 with Retry-After when the limiter
/// failed (its fail_closed denials, or an error it raised); 400 for a malformed request the
/// limit allows (malformed requests count against the client's IP). Every rate-limited
/// response carries the RateLimit-Policy and RateLimit fields (see redlimit/ratelimit_fields.hpp).
///
/// `GET /metrics` is not rate limited and carries no RateLimit fields: it answers the
/// Prometheus text exposition of `metrics` (what the limiter and its Redis client counted;
/// docs/operations.md lists the metrics).
class Gateway final : public RequestHandler {
 public:
  /// `quotas` describes the limits of `limiter`'s policy, in order. The limiter and `metrics`
  /// must outlive the gateway.
  Gateway(redlimit::Limiter& limiter, std::vector<QuotaPolicy> quotas,
          const redlimit::Metrics& metrics);
  /// Also limits all requests together by `global` (its one key "all"), which `global_quota`
  /// describes; RateLimit names the binding one of all the quotas. `global` must outlive the
  /// gateway.
  Gateway(redlimit::Limiter& limiter, std::vector<QuotaPolicy> quotas, redlimit::Limiter& global,
          QuotaPolicy global_quota, const redlimit::Metrics& metrics);

  redlimit::Task<Response> handle(Request request) override;

 private:
  /// The response to a request for /metrics.
  Response metrics_response(const Request& request) const;
  /// The decision for `partition`: its key's limits, and the global one if there is one.
  redlimit::Task<redlimit::Decision> decide(std::string partition);
  /// The response for `decision`, taken for `partition`.
  Response answer(const Request& request, const redlimit::Decision& decision,
                  const std::string& partition) const;

  redlimit::Limiter& limiter_;
  std::vector<QuotaPolicy> quotas_;
  redlimit::Limiter* global_ = nullptr;
  QuotaPolicy global_quota_;
  const redlimit::Metrics& metrics_;
  std::string policy_field_;  ///< the same on every response
};

}  // namespace http_gateway
