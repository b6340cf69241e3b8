#include <array>
#include <cstdio>
#include <stop_token>

#include "limiter/key_format.hpp"
#include "limiter/semaphore_core.hpp"
#include "lua_scripts.hpp"
#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"

namespace redlimit {
namespace detail {
namespace {

using Clock = std::chrono::steady_clock;

/// A waiter that heard nothing asks again at least this often (with jitter), in case a release
/// notice was lost while the pub/sub connection was down.
constexpr std::chrono::milliseconds fallback_poll{1000};

Task<void> release_in_background(std::shared_ptr<SemaphoreCore> core, std::string redis_key,
                                 std::string id, std::int64_t permits) {
  co_await core->call("release", std::move(redis_key), std::move(id), permits);
}

}  // namespace

SemaphoreCore::SemaphoreCore(CommandDispatcher& client, std::int64_t capacity,
                             SemaphoreOptions options)
    : client_(client),
      capacity_(capacity),
      prefix_(std::move(options.prefix)),
      escaped_name_(escape_key_part(options.name)),
      lease_ttl_(options.lease_ttl),
      random_(std::random_device{}()) {
  const std::string& name = options.name;
  const std::chrono::milliseconds lease_ttl = options.lease_ttl;
  if (capacity < 1 || capacity > 100'000) {
    throw InvalidArgument("Semaphore permits must be in [1, 100000], got " +
                          std::to_string(capacity));
  }
  if (name.empty() || name.size() > 128) {
    throw InvalidArgument("Semaphore name must be 1 to 128 bytes, got " +
                          std::to_string(name.size()));
  }
  if (!is_valid_prefix(prefix_)) {
    throw InvalidArgument(
        "SemaphoreOptions::prefix must be 1 to 64 characters from "
        "[A-Za-z0-9_.-], got '" +
        prefix_ + "'");
  }
  if (lease_ttl.count() < 1 || lease_ttl.count() > 1'099'511'627) {
    throw InvalidArgument("Semaphore lease_ttl must be in [1 ms, 2^40 us (about 12.7 days)], got " +
                          std::to_string(lease_ttl.count()) + " ms");
  }
}

std::string SemaphoreCore::redis_key(std::string_view key) const {
  if (key.empty()) throw InvalidArgument("key must not be empty");
  if (key.size() > max_key_bytes) {
    throw InvalidArgument("key must be at most " + std::to_string(max_key_bytes) + " bytes");
  }
  return key_base(prefix_, escaped_name_, key).str() + ":semaphore";
}

void SemaphoreCore::check_permits(std::int64_t permits) const {
  if (permits < 1 || permits > capacity_) {
    throw InvalidArgument("permits must be in [1, " + std::to_string(capacity_) +
                          "] (the semaphore's capacity), got " + std::to_string(permits));
  }
}

std::string SemaphoreCore::new_lease_id() {
  char id[33];
  std::snprintf(id, sizeof id, "%016llx%016llx", static_cast<unsigned long long>(random_()),
                static_cast<unsigned long long>(random_()));
  return id;
}

Task<LeaseReply> SemaphoreCore::call(std::string op, std::string redis_key, std::string lease_id,
                                     std::int64_t permits) {
  const std::array<std::string_view, 1> keys = {redis_key};
  const std::string capacity = std::to_string(capacity_);
  const std::string count = std::to_string(permits);
  const std::string ttl = std::to_string(lease_ttl_.count());
  const std::array<std::string_view, 6> args = {op, "", capacity, count, lease_id, ttl};
  const Reply reply =
      co_await client_.eval(scripts::semaphore, keys, args, client_.command_deadline());
  const auto& fields = reply.as_array();
  if (fields.size() < 2) throw ProtocolError("the semaphore script returned too few fields");
  LeaseReply out;
  out.granted = fields[0].as_integer() >= 1;
  out.now_us = fields[1].as_integer();
  if (fields.size() >= 3) out.expires_or_free_at_us = fields[2].as_integer();
  co_return out;
}

Task<LeaseReply> SemaphoreCore::grant(std::string key, std::string lease_id, std::int64_t permits) {
  std::exception_ptr lost;
  try {
    co_return co_await call("acquire", key, lease_id, permits);
  } catch (const Unavailable& e) {
    if (!e.maybe_executed()) throw;
    lost = std::current_exception();
  }
  // The grant may have happened without us hearing of it: give it back, and report the error.
  spawn(loop(), release_in_background(shared_from_this(), std::move(key), lease_id, permits));
  std::rethrow_exception(lost);
}

Task<std::optional<Lease>> SemaphoreCore::try_acquire(std::string key, std::int64_t permits) {
  std::string redis = redis_key(key);
  check_permits(permits);
  std::string id = new_lease_id();
  const LeaseReply reply = co_await grant(redis, id, permits);
  if (!reply.granted) co_return std::nullopt;
  co_return Lease(shared_from_this(), std::move(redis), std::move(id), permits,
                  reply.expires_or_free_at_us);
}

Task<Lease> SemaphoreCore::acquire(std::string key, std::int64_t permits,
                                   OwnedAcquireOptions options) {
  std::string redis = redis_key(key);
  check_permits(permits);
  if (options.max_wait.count() < 0) {
    throw InvalidArgument("AcquireOptions::max_wait must not be negative");
  }
  if (options.stop.stop_requested()) throw Cancelled("acquire cancelled before it started");
  const auto started = Clock::now();
  std::string id = new_lease_id();

  // Why a notice per waiter: a release anywhere wakes it at once; expiries need the timer.
  // `releases` counts notices, so one that arrives while a grant is in flight is not lost.
  std::stop_source* wake = nullptr;
  std::uint64_t releases = 0;
  Subscriber& subscriber = client_.subscriber();
  struct Subscription {
    Subscriber& subscriber;
    std::uint64_t id;
    ~Subscription() { subscriber.unsubscribe(id); }
  } subscription{subscriber,
                 subscriber.subscribe(redis + ":released", [&wake, &releases](std::string_view) {
                   ++releases;
                   if (wake != nullptr) wake->request_stop();
                 })};
  struct Forward {
    std::stop_source* target;
    void operator()() const noexcept { target->request_stop(); }
  };

  for (;;) {
    const std::uint64_t releases_before = releases;
    const LeaseReply reply = co_await grant(redis, id, permits);
    if (reply.granted) {
      co_return Lease(shared_from_this(), std::move(redis), std::move(id), permits,
                      reply.expires_or_free_at_us);
    }
    const auto waited =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started);
    if (waited >= options.max_wait) {
      throw MaxWaitExceeded("no " + std::to_string(permits) + " permit(s) of semaphore key '" +
                            key + "' became free within max_wait");
    }
    if (releases != releases_before) continue;  // released while we asked: ask again now
    const std::uint64_t jitter = std::uniform_int_distribution<std::uint64_t>(0, 250'000)(random_);
    auto sleep = std::min<std::chrono::microseconds>(
        std::chrono::microseconds(reply.expires_or_free_at_us - reply.now_us),
        fallback_poll + std::chrono::microseconds(jitter));
    sleep = std::min(sleep, options.max_wait - waited);
    std::stop_source woken;
    wake = &woken;
    std::stop_callback<Forward> forward(options.stop, Forward{&woken});
    try {
      co_await sleep_for(loop(), sleep, woken.get_token());
    } catch (const Cancelled&) {  // a release notice, or the caller's stop request
    }
    wake = nullptr;
    if (options.stop.stop_requested()) throw Cancelled("semaphore acquire cancelled");
  }
}

}  // namespace detail

// ---- Lease

Lease::Lease(std::shared_ptr<detail::SemaphoreCore> core, std::string key, std::string id,
             std::int64_t permits, std::int64_t expires_at_us)
    : core_(std::move(core)),
      key_(std::move(key)),
      id_(std::move(id)),
      permits_(permits),
      expires_at_us_(expires_at_us),
      held_(true) {}

Lease::Lease(Lease&& other) noexcept
    : core_(std::move(other.core_)),
      key_(std::move(other.key_)),
      id_(std::move(other.id_)),
      permits_(other.permits_),
      expires_at_us_(other.expires_at_us_),
      released_at_us_(other.released_at_us_),
      held_(std::exchange(other.held_, false)) {}

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Lease released(std::move(*this));  // releases what this held, in the background
    core_ = std::move(other.core_);
    key_ = std::move(other.key_);
    id_ = std::move(other.id_);
    permits_ = other.permits_;
    expires_at_us_ = other.expires_at_us_;
    released_at_us_ = other.released_at_us_;
    held_ = std::exchange(other.held_, false);
  }
  return *this;
}

Lease::~Lease() {
  if (!held_) return;
  spawn(core_->loop(),
        detail::release_in_background(core_, std::move(key_), std::move(id_), permits_));
}

Task<void> Lease::renew() {
  if (!held_) throw LeaseExpired("renew() of a lease that was released");
  const detail::LeaseReply reply = co_await core_->call("renew", key_, id_, permits_);
  if (!reply.granted) {
    held_ = false;
    throw LeaseExpired("lease " + id_ +
                       " expired before renew(); its permits may be held by others");
  }
  expires_at_us_ = reply.expires_or_free_at_us;
}

Task<void> Lease::release() {
  if (!held_) co_return;
  held_ = false;
  const detail::LeaseReply reply = co_await core_->call("release", key_, id_, permits_);
  if (reply.granted) released_at_us_ = reply.now_us;
}

// ---- Semaphore

Semaphore::Semaphore(Client& client, std::int64_t permits, SemaphoreOptions options)
    : core_(std::make_shared<detail::SemaphoreCore>(client.core(), permits, std::move(options))) {}

Semaphore::Semaphore(Client& client, std::int64_t permits, std::string name,
                     std::chrono::milliseconds lease_ttl)
    : Semaphore(client, permits,
                SemaphoreOptions{.name = std::move(name), .lease_ttl = lease_ttl}) {}

Semaphore::~Semaphore() = default;

Task<std::optional<Lease>> Semaphore::try_acquire(std::string key, std::int64_t permits) {
  return core_->try_acquire(std::move(key), permits);
}

Task<Lease> Semaphore::acquire(std::string key, std::int64_t permits, AcquireOptions options) {
  return core_->acquire(std::move(key), permits, detail::OwnedAcquireOptions(options));
}

}  // namespace redlimit
