#include "gateway.hpp"

#include <cstdio>
#include <exception>
#include <optional>

namespace http_gateway {
namespace {

/// Longer X-API-Key values are not used as limiter keys: such a request counts as malformed.
constexpr std::size_t max_api_key_bytes = 256;

/// The global limiter's one key, and the partition its RateLimit field names.
constexpr std::string_view global_key = "all";

/// What the gateway answers when the limiter raised instead of deciding: what fail_closed
/// answers, with a retry in a second.
redlimit::Decision failed_decision() {
  redlimit::Decision decision;
  decision.retry_after = std::chrono::seconds(1);
  decision.source = redlimit::Source::fail_closed;
  return decision;
}

/// A "quota-exceeded" problem (draft-ietf-httpapi-ratelimit-headers-10 §5.1, RFC 9457).
std::string quota_exceeded(const std::string& policy) {
  return "{\"type\":\"https://iana.org/assignments/http-problem-types#quota-exceeded\","
         "\"title\":\"Too Many Requests\",\"status\":429,\"violated-policies\":[\"" +
         policy + "\"]}\n";
}

/// Whether `decision` counted the partition's quota (in Redis, in process, or this process's
/// share of it): fail_open and fail_closed answers, made when Redis could not, know nothing of it.
bool counts_quota(const redlimit::Decision& decision) {
  return decision.source != redlimit::Source::fail_open &&
         decision.source != redlimit::Source::fail_closed;
}

}  // namespace

Gateway::Gateway(redlimit::Limiter& limiter, std::vector<QuotaPolicy> quotas,
                 const redlimit::Metrics& metrics)
    : limiter_(limiter),
      quotas_(std::move(quotas)),
      metrics_(metrics),
      policy_field_(redlimit::ratelimit_policy_field(quotas_)) {}

Gateway::Gateway(redlimit::Limiter& limiter, std::vector<QuotaPolicy> quotas,
                 redlimit::Limiter& global, QuotaPolicy global_quota,
                 const redlimit::Metrics& metrics)
    : Gateway(limiter, std::move(quotas), metrics) {
  global_ = &global;
  global_quota_ = std::move(global_quota);
  std::vector<QuotaPolicy> all = quotas_;
  all.push_back(global_quota_);
  policy_field_ = redlimit::ratelimit_policy_field(all);
}

redlimit::Task<redlimit::Decision> Gateway::decide(std::string partition) {
  if (global_ == nullptr) co_return co_await limiter_.try_acquire(std::move(partition));
  // Why the vector first: g++ 12 cannot build an initializer list inside a co_await.
  std::vector<redlimit::Claim> claims{{&limiter_, std::move(partition)},
                                      {global_, std::string(global_key)}};
  co_return co_await redlimit::try_acquire_all(std::move(claims));
}

redlimit::Task<Response> Gateway::handle(Request request) {
  // Why not limited: a scraper must see the gateway most of all while it denies requests.
  if (!request.malformed && request.target.substr(0, request.target.find('?')) == "/metrics") {
    co_return metrics_response(request);
  }
  if (request.api_key.size() > max_api_key_bytes) {
    request.malformed = true;
  }
  // Why the IP for a malformed request: the key it names was parsed from bytes we rejected.
  const std::string partition = request.malformed || request.api_key.empty()
                                    ? "ip:" + request.peer_ip
                                    : "key:" + request.api_key;
  std::optional<redlimit::Decision> decision;
  try {
    redlimit::Task<redlimit::Decision> pending = decide(partition);
    decision = co_await std::move(pending);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "http_gateway: the limiter failed: %s\n", e.what());
  }
  co_return answer(request, decision.value_or(failed_decision()), partition);
}

Response Gateway::metrics_response(const Request& request) const {
  Response response;
  if (request.method != "GET" && request.method != "HEAD") {
    response.status = 405;
    response.headers.emplace_back("Allow", "GET, HEAD");
    response.body = "method not allowed\n";
    return response;
  }
  response.content_type = "text/plain; version=0.0.4; charset=utf-8";
  response.body = metrics_.prometheus_text();
  return response;
}

Response Gateway::answer(const Request& request, const redlimit::Decision& decision,
                         const std::string& partition) const {
  // Claim 1 is the global limit's (claim 0, the key's, is also every single-limiter decision).
  const bool global = global_ != nullptr && decision.claim == 1;
  const QuotaPolicy& binding = global ? global_quota_ : quotas_.at(decision.binding);
  Response response;
  response.headers.emplace_back("RateLimit-Policy", policy_field_);
  // Why only then: a RateLimit field states the partition's quota (r=0: used up), which an
  // answer made without Redis does not know; RateLimit-Policy still describes the quotas.
  if (counts_quota(decision)) {
    response.headers.emplace_back(
        "RateLimit",
        redlimit::ratelimit_field(binding, decision, global ? std::string(global_key) : partition));
  }
  if (decision.allowed) {
    response.status = request.malformed ? 400 : 200;
    response.body = request.malformed ? "bad request\n" : "ok\n";
    return response;
  }
  const std::string retry_after = std::to_string(redlimit::whole_seconds_up(decision.retry_after));
  response.headers.emplace_back("Retry-After", retry_after);
  if (decision.source == redlimit::Source::fail_closed) {
    response.status = 503;
    response.body =
        "rate limiter unavailable: Redis did not answer, and this gateway refuses "
        "requests it cannot count (fail-closed); retry in " +
        retry_after + " s\n";
  } else {
    response.status = 429;
    response.content_type = "application/problem+json";
    response.body = quota_exceeded(binding.name);
  }
  return response;
}

}  // namespace http_gateway
