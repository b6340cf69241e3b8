#include "policy/compiled_policy.hpp"

#include <numeric>

#include "algorithms/exact.hpp"
#include "algorithms/reservations.hpp"
#include "algorithms/sliding_window_log.hpp"
#include "policy/validation.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

[[noreturn]] void invalid(const std::string& field, const std::string& why) {
  throw InvalidArgument(field + " " + why);
}

void check_range(const std::string& field, std::int64_t value, std::int64_t low, std::int64_t high,
                 const char* unit = "") {
  if (value < low || value > high) {
    invalid(field, "must be in [" + std::to_string(low) + ", " + std::to_string(high) + "]" + unit +
                       ", got " + std::to_string(value));
  }
}

CompiledLimit compile_limit(const Limit& limit, std::size_t index) {
  const std::string field = "policy.limits[" + std::to_string(index) + "]";
  const std::int64_t permits = limit.rate.permits;
  const std::int64_t period = limit.rate.period.count();
  check_range(field + ".rate.permits", permits, 1, max_permits);
  check_range(field + ".rate.period", period, 1, max_period_us, " microseconds");
  check_range(field + ".burst", limit.burst, 0, max_permits);

  if (to_string(limit.algorithm) == "unknown") {
    invalid(field + ".algorithm", "is not one of the six algorithms (got " +
                                      std::to_string(static_cast<int>(limit.algorithm)) + ")");
  }
  CompiledLimit out;
  out.limit = limit;
  out.key_suffix = ":" + std::string(to_string(limit.algorithm)) + ":" + std::to_string(index);
  out.description =
      field + " (" + std::string(to_string(limit.algorithm)) + " " + to_string(limit.rate) + ")";
  out.spec.algorithm = limit.algorithm;
  if (can_reserve(limit.algorithm)) {  // a bucket
    const std::int64_t divisor = std::gcd(permits, period);
    const std::int64_t p = permits / divisor;
    const std::int64_t d = period / divisor;
    const std::int64_t burst = limit.burst == 0 ? permits : limit.burst;
    // burst * d bounds every product the scripts form; burst * d / p is the drain time.
    if (static_cast<Int128>(burst) * d > max_exact) {
      invalid(field, "cannot be computed exactly: burst (" + std::to_string(burst) +
                         ") x period/gcd(permits, period) (" + std::to_string(d) +
                         " us) must be at most 2^52; lower the burst or the period");
    }
    if (burst * d / p > max_capacity_us) {
      invalid(field, "drains in more than 10 years: burst x period / permits must be at most " +
                         std::to_string(max_capacity_us) + " us");
    }
    out.spec.a = p;
    out.spec.b = d;
    out.spec.c = burst;
    out.capacity = burst;
  } else {
    if (limit.algorithm == Algorithm::sliding_window_log && permits > sliding_log_max_permits) {
      invalid(field + ".rate.permits",
              "must be at most " + std::to_string(sliding_log_max_permits) +
                  " for sliding_window_log, which stores one entry per permit (got " +
                  std::to_string(permits) + "); use sliding_window_counter for larger limits");
    }
    out.spec.a = permits;
    out.spec.b = period;
    out.spec.c = limit.algorithm == Algorithm::fixed_window && limit.window == Window::anchored;
    out.capacity = permits;
  }
  out.fields = {std::string(to_string(limit.algorithm)), std::to_string(out.spec.a),
                std::to_string(out.spec.b), std::to_string(out.spec.c)};
  return out;
}

}  // namespace

std::shared_ptr<const CompiledPolicy> CompiledPolicy::compile(Policy policy, PolicyEpoch epoch) {
  if (policy.limits.empty()) throw InvalidArgument("policy.limits must hold at least one limit");
  if (policy.limits.size() > 16) {
    throw InvalidArgument("policy.limits must hold at most 16 limits, got " +
                          std::to_string(policy.limits.size()));
  }
  auto compiled = std::make_shared<CompiledPolicy>();
  for (std::size_t i = 0; i < policy.limits.size(); ++i) {
    compiled->limits_.push_back(compile_limit(policy.limits[i], i));
    compiled->specs_.push_back(compiled->limits_.back().spec);
  }
  const auto check_exact = [](const std::string& what, std::int64_t value) {
    if (value < 0 || value > max_exact)
      throw InvalidArgument(what + " must be in [0, 2^52], got " + std::to_string(value));
  };
  check_exact("a policy version", epoch.version);
  check_exact("a policy's since_us", epoch.since_us);
  compiled->policy_ = std::move(policy);
  compiled->epoch_ = epoch;
  compiled->epoch_fields_ = {std::to_string(epoch.version), std::to_string(epoch.since_us),
                             std::to_string(static_cast<int>(epoch.carry))};
  return compiled;
}

std::shared_ptr<const CompiledPolicy> CompiledPolicy::only(std::size_t index) const {
  auto one = std::make_shared<CompiledPolicy>(*this);
  one->limits_ = {limits_.at(index)};
  one->specs_ = {specs_.at(index)};
  one->policy_.limits = {policy_.limits.at(index)};
  return one;
}

bool CompiledPolicy::reservable() const noexcept {
  return limits_.size() == 1 && can_reserve(limits_.front().limit.algorithm);
}

void CompiledPolicy::check_permits(std::int64_t permits) const {
  for (const CompiledLimit& limit : limits_) {
    detail::check_permits(permits, limit.capacity, limit.description);
  }
}

}  // namespace redlimit::detail

namespace redlimit {

void check_policy(const Policy& policy) {
  static_cast<void>(detail::CompiledPolicy::compile(policy));
}

}  // namespace redlimit
