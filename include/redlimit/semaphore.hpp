#pragma once
/// @file semaphore.hpp
/// Semaphore: at most N permits held at once per key, across processes, with leases.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "redlimit/limiter.hpp"
#include "redlimit/task.hpp"

namespace redlimit {

class Client;

namespace detail {
class SemaphoreCore;
}

/// Permits held from a Semaphore until released or until the lease expires (a holder that
/// crashes loses its permits at expiry). Move-only. Destroying a held lease releases it in the
/// background (a spawned task; errors go to the spawn error handler). Use it on the loop's thread;
/// the Semaphore's Client must outlive it.
class Lease {
 public:
  Lease(Lease&& other) noexcept;
  Lease& operator=(Lease&& other) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease();

  /// The lease id (random, made by the client).
  const std::string& id() const noexcept { return id_; }
  const std::string& key() const noexcept { return key_; }
  std::int64_t permits() const noexcept { return permits_; }
  /// When the lease expires, in server microseconds since the epoch (as of the last renew).
  std::int64_t expires_at_us() const noexcept { return expires_at_us_; }
  /// False once released (or moved from).
  bool held() const noexcept { return held_; }
  /// The server time at which release() gave the permits back, or 0 if it gave none back (never
  /// called, or the lease had already expired).
  std::int64_t released_at_us() const noexcept { return released_at_us_; }

  /// Extends the lease by the semaphore's lease TTL from now. Throws LeaseExpired if it already
  /// expired (its permits may be held by others now). Keep the lease alive until it completes.
  Task<void> renew();
  /// Gives the permits back. Idempotent, and harmless for an expired lease: a release never adds
  /// permits that the lease does not hold. Keep the lease alive until it completes.
  Task<void> release();

 private:
  friend class detail::SemaphoreCore;
  Lease(std::shared_ptr<detail::SemaphoreCore> core, std::string key, std::string id,
        std::int64_t permits, std::int64_t expires_at_us);

  std::shared_ptr<detail::SemaphoreCore> core_;
  std::string key_;
  std::string id_;
  std::int64_t permits_ = 0;
  std::int64_t expires_at_us_ = 0;
  std::int64_t released_at_us_ = 0;
  bool held_ = false;
};

/// How a Semaphore names its keys and how long its leases live.
struct SemaphoreOptions {
  /// The namespace of its keys, e.g. "exports"; 1 to 128 bytes, any bytes.
  std::string name;
  /// The first part of every key: 1 to 64 characters from [A-Za-z0-9_.-].
  std::string prefix = "rl";
  /// How long a lease lives unless renewed: 1 ms to about 12.7 days.
  std::chrono::milliseconds lease_ttl = std::chrono::seconds(30);
};

/// A concurrency limit: at most `permits` held at once per key, across every process sharing
/// the Redis. Each acquisition is a Lease with a TTL. Keys are
/// `<prefix>:{<name>:<key>}:semaphore`, escaped as the Limiter's are.
class Semaphore {
 public:
  /// `permits` in [1, 100000]. Throws InvalidArgument, naming the field, for anything outside
  /// SemaphoreOptions' ranges.
  Semaphore(Client& client, std::int64_t permits, SemaphoreOptions options);
  /// The same with the prefix "rl".
  Semaphore(Client& client, std::int64_t permits, std::string name,
            std::chrono::milliseconds lease_ttl = std::chrono::seconds(30));
  ~Semaphore();
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;

  /// A lease if `permits` are free now, else nullopt.
  Task<std::optional<Lease>> try_acquire(std::string key, std::int64_t permits = 1);
  /// Waits until `permits` are free: woken by a release anywhere (a notice through Redis
  /// pub/sub), or when the next lease expires, whichever is first. Throws MaxWaitExceeded after
  /// options.max_wait, Cancelled on a stop request.
  Task<Lease> acquire(std::string key, std::int64_t permits = 1, AcquireOptions options = {});

 private:
  std::shared_ptr<detail::SemaphoreCore> core_;
};

}  // namespace redlimit
