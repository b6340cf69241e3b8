// A limiter's own policy: the same for every key, replaced only by set_policy().

#include "policy/policy_source.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

class FixedPolicy final : public PolicySource {
 public:
  explicit FixedPolicy(const Policy& policy) : policy_(CompiledPolicy::compile(policy)) {}

  std::shared_ptr<const CompiledPolicy> ready(std::string_view) override { return policy_; }
  Task<std::shared_ptr<const CompiledPolicy>> resolve(std::string, std::int64_t, Clock::time_point,
                                                      WhenUnread) override {
    co_return policy_;
  }
  std::shared_ptr<const CompiledPolicy> last(std::string_view) const override { return policy_; }
  std::shared_ptr<const CompiledPolicy> named() const override { return policy_; }
  bool stored() const noexcept override { return false; }
  void on_change(std::function<void()> on_change) override { on_change_ = std::move(on_change); }

  void replace(const Policy& policy, Carry carry) override {
    if (policy.scope != policy_->policy().scope && carry != Carry::reset) {
      throw InvalidArgument(
          "set_policy(): the policy changes the scope: every key starts afresh under another "
          "scope (its keys are other keys), so that change is made only with Carry::reset");
    }
    // Why the system clock: the change takes effect now; Redis converts a key at
    // min(since, its own TIME), so a client clock ahead of Redis's only means "at once".
    const auto now = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::system_clock::now().time_since_epoch());
    policy_ =
        CompiledPolicy::compile(policy, {.version = 0, .since_us = now.count(), .carry = carry});
    if (on_change_) on_change_();
  }

 private:
  // Why shared: calls in flight keep the policy they started with when replace() replaces it.
  std::shared_ptr<const CompiledPolicy> policy_;
  std::function<void()> on_change_;
};

}  // namespace

std::unique_ptr<PolicySource> fixed_policy(const Policy& policy) {
  return std::make_unique<FixedPolicy>(policy);
}

}  // namespace redlimit::detail
