#include "policy_publisher.hpp"

#include "redlimit/policy_store.hpp"

namespace redlimit_server {
namespace {

/// Every enforced limit of `node` and below.
void collect(const DescriptorNode& node, std::vector<const LimitConfig*>& out) {
  if (node.limit && !node.limit->unlimited && node.limit->requests_per_unit > 0)
    out.push_back(&*node.limit);
  for (const auto& [key, child] : node.children)
    collect(child, out);
}

}  // namespace

redlimit::Task<int> publish_policies(redlimit::Client& client, const RateLimitConfig& config,
                                     std::string prefix) {
  std::vector<const LimitConfig*> limits;
  for (const auto& [name, domain] : config.domains)
    collect(domain.root, limits);
  redlimit::PolicyStore store(client, std::move(prefix));
  int written = 0;
  for (const LimitConfig* limit : limits) {
    const redlimit::Policy policy = redlimit::Policy::of(limit->limit());
    const std::optional<redlimit::Policy> stored = co_await store.get(limit->full_key);
    if (stored && *stored == policy) continue;
    co_await store.set(limit->full_key, policy, redlimit::Carry::as_is);
    ++written;
  }
  co_return written;
}

}  // namespace redlimit_server
