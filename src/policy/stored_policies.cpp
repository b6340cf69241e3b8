// The policies a PolicyStore holds for a limiter's name, as its PolicyFollower keeps them.

#include "policy/policy_follower.hpp"
#include "policy/policy_source.hpp"
#include "policy/unconfirmed_policy.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

class StoredPolicies final : public PolicySource {
 public:
  StoredPolicies(std::shared_ptr<PolicyFollower> follower, std::string name)
      : follower_(std::move(follower)), name_(std::move(name)) {}
  // Why: the follower may outlive this source (reads in flight keep it).
  ~StoredPolicies() override { follower_->on_change({}); }
  StoredPolicies(const StoredPolicies&) = delete;
  StoredPolicies& operator=(const StoredPolicies&) = delete;

  std::shared_ptr<const CompiledPolicy> ready(std::string_view key) override {
    const auto followed = follower_->ready();
    return followed ? followed->for_key(key) : nullptr;
  }

  Task<std::shared_ptr<const CompiledPolicy>> resolve(std::string key, std::int64_t min_version,
                                                      Clock::time_point deadline,
                                                      WhenUnread when_unread) override;

  std::shared_ptr<const CompiledPolicy> last(std::string_view key) const override {
    const auto& followed = follower_->last();
    return followed ? followed->for_key(key) : nullptr;
  }
  std::shared_ptr<const CompiledPolicy> named() const override {
    const auto& followed = follower_->last();
    return followed ? followed->policy : nullptr;
  }
  bool stored() const noexcept override { return true; }

  void replace(const Policy&, Carry) override {
    throw InvalidArgument(
        "set_policy() on a limiter that follows a PolicyStore: change the "
        "stored policy instead (PolicyStore::set)");
  }

  void on_change(std::function<void()> on_change) override {
    follower_->on_change(std::move(on_change));
  }

 private:
  std::shared_ptr<PolicyFollower> follower_;
  std::string name_;
};

Task<std::shared_ptr<const CompiledPolicy>> StoredPolicies::resolve(std::string key,
                                                                    std::int64_t min_version,
                                                                    Clock::time_point deadline,
                                                                    WhenUnread when_unread) {
  // Why at most twice: a key written under a version the store lost makes the store advance
  // its versions once; still older after that is a store this release cannot follow.
  std::int64_t read_at_least = min_version;
  for (bool advanced = false;; advanced = true) {
    std::shared_ptr<const FollowedPolicies> followed;
    std::string unread = "the connection to Redis ended again while it was read";
    std::exception_ptr unread_error;
    try {
      followed = co_await PolicyFollower::current(follower_, read_at_least, deadline);
    } catch (const Unavailable& e) {
      unread = e.what();  // Redis cannot answer: never an allow
      unread_error = std::current_exception();
    }
    if (!followed || !follower_->verified(*followed)) {
      // Why not PolicyNotFound when asked again after StalePolicy: a policy was read, and Redis
      // did not answer the read again by the call's deadline.
      if (min_version > 0) {
        if (unread_error) std::rethrow_exception(unread_error);
        throw ConnectionError(unread);
      }
      const std::shared_ptr<const FollowedPolicies>& read_last =
          followed ? followed : follower_->last();
      if (read_last && read_last->for_key(key)) {
        throw UnconfirmedPolicy(read_last->for_key(key), unread);
      }
      if (when_unread == WhenUnread::unavailable && unread_error) {
        std::rethrow_exception(unread_error);
      }
      throw PolicyNotFound(
          "no policy of '" + name_ + "' could be read from its PolicyStore yet: " + unread, false);
    }
    const std::shared_ptr<const CompiledPolicy> policy = followed->for_key(key);
    if (!policy) {
      throw PolicyNotFound("no policy is stored under '" + name_ +
                           "' (PolicyStore::set), nor an override for the key");
    }
    if (policy->epoch().version >= min_version) co_return policy;
    // The policy was just read again (a script named a newer version), and the store holds
    // nothing that new for the key: it lost the changes the key's state was written under.
    if (advanced) {
      throw ConfigError("the stored policy is older than the state of key '" + key + "' of '" +
                        name_ + "': the state was written under version " +
                        std::to_string(min_version) + ", the store holds version " +
                        std::to_string(policy->epoch().version) +
                        " for the key (was the policy record lost while the state remained?)");
    }
    // Why what it answered: a read as new as min_version (other keys' changes since the loss)
    // may still be older than the advance.
    read_at_least = co_await PolicyFollower::advance(follower_, key, min_version, deadline);
  }
}

}  // namespace

std::unique_ptr<PolicySource> stored_policies(std::shared_ptr<PolicyFollower> follower,
                                              std::string name) {
  return std::make_unique<StoredPolicies>(std::move(follower), std::move(name));
}

}  // namespace redlimit::detail
