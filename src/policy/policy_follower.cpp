#include "policy/policy_follower.hpp"

#include <spdlog/spdlog.h>

#include <optional>
#include <utility>

#include "policy/policy_records.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "runtime/background_tasks.hpp"

namespace redlimit::detail {
namespace {

std::optional<PolicyEpoch> epoch_of(const std::shared_ptr<const CompiledPolicy>& policy) {
  if (!policy) return std::nullopt;
  return policy->epoch();
}

/// Whether `a` and `b` hold the same changes: the same policies under the same epochs. Why not
/// the versions alone: the store's versions start again after a restart that lost them, and
/// another policy may come back under a version a follower holds (its epoch's time differs).
bool same_epochs(const FollowedPolicies& a, const FollowedPolicies& b) {
  if (a.version != b.version || epoch_of(a.policy) != epoch_of(b.policy) ||
      a.per_key.size() != b.per_key.size()) {
    return false;
  }
  for (const auto& [key, policy] : a.per_key) {
    const auto it = b.per_key.find(key);
    if (it == b.per_key.end() || it->second->epoch() != policy->epoch()) return false;
  }
  return true;
}

}  // namespace

const std::shared_ptr<const CompiledPolicy>& FollowedPolicies::for_key(std::string_view key) const {
  const auto found = per_key.empty() ? per_key.end() : per_key.find(key);
  return found != per_key.end() ? found->second : policy;
}

PolicyFollower::PolicyFollower(std::shared_ptr<CommandDispatcher> redis, std::string_view prefix,
                               std::string_view name, std::chrono::microseconds refresh)
    : redis_(std::move(redis)), record_key_(policy_record_key(prefix, name)), refresh_(refresh) {}

PolicyFollower::~PolicyFollower() {
  if (subscription_ != 0) redis_->subscriber().unsubscribe(subscription_);
}

std::shared_ptr<const FollowedPolicies> PolicyFollower::ready() {
  if (subscription_ == 0 || !followed_ || !verified(*followed_) ||
      (!followed_->policy && followed_->per_key.empty())) {
    return nullptr;
  }
  if (Clock::now() - read_at_ >= refresh_) read_in_background();
  return followed_;
}

Task<std::shared_ptr<const FollowedPolicies>> PolicyFollower::current(
    std::shared_ptr<PolicyFollower> self, std::int64_t min_version, Clock::time_point deadline) {
  // Why not after close(): a subscription would open a connection nobody closes.
  if (self->subscription_ == 0 && !self->redis_->closed()) {
    // Why before the first read: a change made after the read is then announced to us.
    // Why weakly: the subscriber keeps the handler until the follower's destructor removes it.
    std::weak_ptr<PolicyFollower> weak = self;
    auto on_message = [weak](std::string_view message) {
      if (auto follower = weak.lock()) follower->on_notice(message);
    };
    auto on_confirmed = [weak] {
      if (auto follower = weak.lock()) follower->on_subscribed();
    };
    self->subscription_ = self->redis_->subscriber().subscribe(policy_channel(self->record_key_),
                                                               on_message, on_confirmed);
  }
  auto read_since_contact = [&self] { return self->followed_ && self->verified(*self->followed_); };
  auto fresh_enough = [&self, &read_since_contact, min_version] {
    return read_since_contact() && self->followed_->version >= min_version &&
           (min_version > 0 || self->followed_->policy || !self->followed_->per_key.empty());
  };
  if (!fresh_enough()) {
    const bool waited = self->reading_;
    bool read_ended = co_await self->wait_for_read(deadline);
    // Why read again after waiting: the read we waited for may have started before the change
    // a script told us of, or before the contact broke; a read that merely found nothing
    // stored is recent enough. The next read (one that a notice started as the first ended, or
    // this one) starts after the call needed it.
    if (!fresh_enough() && !(waited && min_version == 0 && read_since_contact())) {
      self->read_in_background();
      read_ended = co_await self->wait_for_read(deadline);
    }
    if (!fresh_enough()) {
      if (!read_ended) {
        throw TimeoutError("the policies stored under " + self->record_key_ +
                           " were not read by the call's deadline");
      }
      // Why not the policies read before the contact broke: the server may have lost them.
      if (self->read_error_ && (min_version > 0 || !read_since_contact())) {
        std::rethrow_exception(self->read_error_);
      }
    }
  } else if (Clock::now() - self->read_at_ >= self->refresh_) {
    self->read_in_background();
  }
  if (!self->followed_) {
    throw ConnectionError("the client is closed: the policies stored under " + self->record_key_ +
                          " cannot be read");
  }
  co_return self->followed_;
}

Task<bool> PolicyFollower::wait_for_read(Clock::time_point deadline) {
  const std::uint64_t ended = reads_ended_;
  while (reading_ && reads_ended_ == ended) {
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) co_return false;
    std::stop_source wake;
    // Why a guard: the caller's frame may be destroyed while waiting; read() must then not wake
    // it. The follower outlives the guard: the caller's frame holds it.
    struct Registration {
      PolicyFollower& self;
      std::stop_source* wake;
      ~Registration() { std::erase(self.read_waiters_, wake); }
    } registration{*this, &wake};
    read_waiters_.push_back(&wake);
    try {
      co_await sleep_for(redis_->loop(), std::chrono::ceil<std::chrono::microseconds>(left),
                         wake.get_token());
    } catch (const Cancelled&) {  // the read ended
    }
  }
  co_return true;
}

Task<void> PolicyFollower::read(std::shared_ptr<PolicyFollower> self) {
  // Why cleared here: this read sees every change stored before it starts.
  self->read_again_ = false;
  // Why taken before: a break during the read leaves its result unverified.
  const std::uint64_t contact = self->redis_->contact();
  std::exception_ptr error;
  try {
    const StoredPolicies stored = co_await read_policies(self->redis_, self->record_key_);
    self->install(stored, contact);
  } catch (...) {
    error = std::current_exception();
  }
  self->read_error_ = error;
  self->read_at_ = Clock::now();
  self->reading_ = false;
  ++self->reads_ended_;
  // A notice that arrived during the read may name a change the read did not see; a change
  // stored before the subscription was confirmed, during the read, was announced to nobody.
  // Why only after a read that succeeded: a notice of a version the store no longer holds (it
  // lost changes) would otherwise start one read after another.
  if (!error && self->read_again_) self->read_in_background();
  // Why safe at any point: sleep_for() resumes a stopped waiter from the loop, never inline.
  for (std::stop_source* waiter : std::exchange(self->read_waiters_, {}))
    waiter->request_stop();
}

void PolicyFollower::read_in_background() {
  // Why not once closed: the background work drops its tasks then, and reading_ would stay set.
  if (reading_ || redis_->closed()) return;
  // Why set before the read starts (on the next loop iteration): a notice or a call arriving
  // meanwhile joins this read instead of starting another.
  reading_ = true;
  // Why the client's background work: it starts on the next loop iteration (a notice arrives
  // inside hiredis, where nothing may resume), Client::close() waits for it, it outlives calls.
  redis_->background().start(read(shared_from_this()));
}

void PolicyFollower::on_notice(std::string_view) {
  // Why every notice, one naming the version held too: the store's versions start again after a
  // restart that lost them, and another policy may come back under that version.
  read_again(true);
}

void PolicyFollower::on_subscribed() {
  // Why: changes stored while the subscription was down were announced to nobody; with nothing
  // read yet, the first read is still to come.
  read_again(followed_ != nullptr);
}

void PolicyFollower::read_again(bool now) {
  if (reading_) {
    read_again_ = true;
  } else if (now) {
    read_in_background();
  }
}

Task<std::int64_t> PolicyFollower::advance(std::shared_ptr<PolicyFollower> self, std::string key,
                                           std::int64_t floor, Clock::time_point deadline) {
  const Advanced advanced =
      co_await advance_policies(self->redis_, self->record_key_, key, floor, deadline);
  if (advanced.done) {
    self->redis_->logger()->warn(
        "the policy store under {} held older versions than key '{}' was written under ({}): it "
        "lost changes (a restart without persistence, or a failover); its versions go on from {}",
        self->record_key_, key, floor, advanced.version);
  }
  co_return advanced.version;
}

void PolicyFollower::install(const StoredPolicies& stored, std::uint64_t contact) {
  auto followed = std::make_shared<FollowedPolicies>();
  followed->version = stored.version;
  followed->contact = contact;
  // Why per key: a key's state is stamped with the version of the change that last set ITS
  // policy, so that another key's override neither converts it again (at a later time, or with
  // the policy's carry once more) nor makes its decisions look newer than they are.
  if (stored.policy) {
    const PolicyRecord& central = *stored.policy;
    followed->policy = CompiledPolicy::compile(
        central.policy, PolicyEpoch{central.version, central.since_us, central.carry});
    for (const auto& [key, removal] : stored.removed_overrides) {
      followed->per_key.emplace(
          key, CompiledPolicy::compile(
                   central.policy, PolicyEpoch{removal.version, removal.since_us, Carry::as_is}));
    }
  }
  for (const auto& [key, record] : stored.overrides) {
    followed->per_key.insert_or_assign(
        key, CompiledPolicy::compile(record.policy,
                                     PolicyEpoch{record.version, record.since_us, Carry::as_is}));
  }
  const bool changed = followed_ && !same_epochs(*followed_, *followed);
  followed_ = std::move(followed);
  if (on_read_) on_read_(*followed_);
  if (!changed || !on_change_) return;
  // Why a copy: the listener may replace itself.
  const auto on_change = on_change_;
  on_change();
}

}  // namespace redlimit::detail
