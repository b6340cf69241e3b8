#include "limiter/policy_gauge.hpp"

#include <utility>
#include <vector>

#include "metrics/instruments.hpp"

namespace redlimit::detail {

void PolicyGauge::show(const Policy& policy) const {
  if (metrics_) metrics_->limiter(name_).show_policy(0, policy.limits);
}

std::shared_ptr<PolicyFollower> PolicyGauge::follow(
    std::shared_ptr<PolicyFollower> follower) const {
  if (!metrics_) return follower;
  // Why the Metrics object, not its LimiterMetrics: the follower may outlive the limiter, and
  // its reads keep what they show alive.
  follower->on_read([metrics = metrics_, name = name_](const FollowedPolicies& followed) {
    std::vector<Limit> limits;
    if (followed.policy) limits = followed.policy->policy().limits;
    metrics->limiter(name).show_policy(followed.version, std::move(limits));
  });
  return follower;
}

}  // namespace redlimit::detail
