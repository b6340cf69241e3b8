#include "proto_translation.hpp"

#include "decider.hpp"

namespace redlimit_server {
namespace {

using envoy::service::ratelimit::v3::RateLimitResponse;

TimeUnit unit_from(int unit) {
  if (unit < static_cast<int>(TimeUnit::second) || unit > static_cast<int>(TimeUnit::year))
    throw InvalidCall("a limit override has an unknown unit (" + std::to_string(unit) + ")");
  return static_cast<TimeUnit>(unit);
}

}  // namespace

RateLimitCall call_from(const envoy::service::ratelimit::v3::RateLimitRequest& request) {
  RateLimitCall call;
  call.domain = request.domain();
  call.hits_addend = request.hits_addend();
  for (const auto& descriptor : request.descriptors()) {
    DescriptorCall one;
    for (const auto& entry : descriptor.entries())
      one.entries.push_back({entry.key(), entry.value()});
    if (descriptor.has_limit()) {
      one.limit = LimitOverride{descriptor.limit().requests_per_unit(),
                                unit_from(descriptor.limit().unit())};
    }
    if (descriptor.has_hits_addend()) one.hits_addend = descriptor.hits_addend().value();
    call.descriptors.push_back(std::move(one));
  }
  return call;
}

void fill(RateLimitResponse& response, const RateLimitAnswer& answer) {
  response.set_overall_code(static_cast<RateLimitResponse::Code>(answer.overall_code));
  for (const DescriptorStatus& status : answer.statuses) {
    auto* out = response.add_statuses();
    out->set_code(static_cast<RateLimitResponse::Code>(status.code));
    out->set_limit_remaining(status.limit_remaining);
    if (status.current_limit) {
      auto* limit = out->mutable_current_limit();
      limit->set_name(status.current_limit->name);
      limit->set_requests_per_unit(status.current_limit->requests_per_unit);
      limit->set_unit(static_cast<RateLimitResponse::RateLimit::Unit>(status.current_limit->unit));
      const auto reset = status.duration_until_reset.count();
      out->mutable_duration_until_reset()->set_seconds(reset / 1'000'000);
      out->mutable_duration_until_reset()->set_nanos(static_cast<int>(reset % 1'000'000) * 1000);
    }
  }
  for (const AddedHeader& header : answer.response_headers_to_add) {
    auto* out = response.add_response_headers_to_add();
    out->set_key(header.key);
    out->set_value(header.value);
  }
}

}  // namespace redlimit_server
