#pragma once
/// @file semaphore.hpp
/// Semaphore: at most N permits held at once per key, across processes, with leases.

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "redlimit/acquire_options.hpp"
#include "redlimit/failure_policy.hpp"
#include "redlimit/limit.hpp"
#include "redlimit/task.hpp"

namespace redlimit {

class Client;

namespace detail {
class LeaseIssuer;
}

/// Permits held from a Semaphore until released or until the lease expires (a holder that
/// crashes loses its permits at expiry). Move-only.
///
/// Semaphore::acquire() returns a lease that is not held (`held()` false, `retry_after()` set)
/// when no permits could be had within AcquireOptions::max_wait, as Limiter::acquire() returns
/// a denial: check it (`if (lease)`) before using the resource.
///
/// Destroying a held lease releases it in the background (in process: at once); Client::close()
/// waits for that release (bounded by its command deadline) before it closes the connections, so a
/// lease destroyed just before close() has given its permits back. A background release that
/// Redis cannot answer is tried again, with backoff, until Redis answers, the lease would have
/// expired or the client closes; giving up is logged as a warning (the permits come back at
/// expiry). Its other errors go to the error handler (set_error_handler). Use it on the loop's
/// thread. A lease keeps its Client's connections alive (shared), but after Client::close() has
/// finished it can no longer release: its permits then come back at expiry.
class Lease {
 public:
  Lease(Lease&& other) noexcept;
  Lease& operator=(Lease&& other) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease();

  /// The lease id (random, made by the client).
  const std::string& id() const noexcept { return id_; }
  /// The semaphore key the lease is on: `<prefix>:{<name>:<key>}:semaphore`.
  const std::string& key() const noexcept { return key_; }
  std::int64_t permits() const noexcept { return permits_; }
  /// When the lease expires, in server microseconds since the epoch (as of the last renew); in
  /// process (Source::local, Source::fallback) by the system clock; 0 for Source::fail_open.
  std::int64_t expires_at_us() const noexcept { return expires_at_us_; }
  /// True while the lease holds its permits: false once released (or moved from), and for a
  /// lease acquire() could not get within max_wait.
  bool held() const noexcept { return held_; }
  /// held().
  explicit operator bool() const noexcept { return held_; }
  /// For a lease acquire() could not get: when asking again may succeed (when enough leases
  /// expire, if nobody releases earlier; when Redis will be tried again). 0 otherwise.
  std::chrono::microseconds retry_after() const noexcept { return retry_after_; }
  /// Who granted (or refused) the lease: Source::redis; Source::local for an in-process
  /// semaphore; when Redis could not answer, the failure policy: Source::fallback (this
  /// process's share, in process), Source::fail_open (granted, but nothing is enforced) or
  /// Source::fail_closed (refused).
  Source source() const noexcept { return source_; }
  /// The server time at which release() gave the permits back, or 0 if it gave none back (never
  /// called, or the lease had already expired).
  std::int64_t released_at_us() const noexcept { return released_at_us_; }

  /// Extends the lease by the semaphore's lease TTL from now. Throws LeaseExpired if it already
  /// expired or is not held (its permits may be held by others now). Keep the lease alive until
  /// it completes.
  Task<void> renew();
  /// Gives the permits back. Idempotent, and harmless for an expired lease: a release never adds
  /// permits that the lease does not hold. Keep the lease alive until it completes.
  Task<void> release();

 private:
  friend class detail::LeaseIssuer;
  Lease(std::shared_ptr<detail::LeaseIssuer> issuer, std::string key, std::string id,
        std::int64_t permits, std::int64_t expires_at_us, Source source, bool held,
        std::chrono::microseconds retry_after);

  std::shared_ptr<detail::LeaseIssuer> issuer_;
  std::string key_;
  std::string id_;
  std::int64_t permits_ = 0;
  std::int64_t expires_at_us_ = 0;
  std::int64_t released_at_us_ = 0;
  std::chrono::microseconds retry_after_{0};
  Source source_ = Source::redis;
  bool held_ = false;
};

/// How a Semaphore names its keys, how long its leases live, and what it does when Redis
/// cannot answer.
struct SemaphoreOptions {
  /// The namespace of its keys, e.g. "exports"; 1 to 128 bytes, any bytes.
  std::string name;
  /// The first part of every key: 1 to 64 characters from [A-Za-z0-9_.-].
  std::string prefix = "rl";
  /// How long a lease lives unless renewed: 1 ms to about 12.7 days.
  std::chrono::milliseconds lease_ttl = std::chrono::seconds(30);
  /// When Redis cannot answer a grant (no connection, timeout, overload; the client's circuit
  /// breaker is open), as for a Limiter: fail_closed refuses (try_acquire gives nullopt;
  /// acquire keeps asking until max_wait, then returns a lease that is not held);
  /// fail_open grants a lease that enforces nothing (Source::fail_open); local_fallback grants
  /// from an in-process semaphore with local_share of the permits (at least 1).
  /// Renewing and releasing a lease that Redis granted still raise the error.
  FailurePolicy on_failure{};
};

/// A concurrency limit: at most `permits` held at once per key, across every process sharing
/// the Redis (or, made with a loop instead of a client, within this process). Each acquisition
/// is a Lease with a TTL. Keys are `<prefix>:{<name>:<key>}:semaphore`, escaped as the
/// Limiter's are.
class Semaphore {
 public:
  /// `permits` in [1, 100000]. Throws InvalidArgument, naming the field, for anything outside
  /// SemaphoreOptions' ranges. A lease's script time in Redis grows with its permits (a
  /// 100,000-permit lease takes 0.1-0.3 s per call: docs/waiting.md).
  Semaphore(Client& client, std::int64_t permits, SemaphoreOptions options);
  /// The same with the prefix "rl".
  Semaphore(Client& client, std::int64_t permits, std::string name,
            std::chrono::milliseconds lease_ttl = std::chrono::seconds(30));
  /// An in-process semaphore on `loop`, with the same rules (leases, TTLs, waiting), as
  /// Limiter(uv_loop_t*, ...) is an in-process limiter. on_failure does not apply.
  Semaphore(uv_loop_t* loop, std::int64_t permits, SemaphoreOptions options);
  ~Semaphore();
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;
  /// Takes over `other`'s state (a moved-from semaphore may only be destroyed or assigned to);
  /// its leases and calls in flight are unaffected.
  Semaphore(Semaphore&& other) noexcept;
  Semaphore& operator=(Semaphore&& other) noexcept;

  /// A held lease if `permits` are free now, else nullopt. Never waits.
  Task<std::optional<Lease>> try_acquire(std::string key, std::int64_t permits = 1);
  /// Waits until `permits` are free: woken by a release anywhere (a notice through Redis
  /// pub/sub), or when the next lease expires, whichever is first. When they cannot be had
  /// within options.max_wait, returns a lease that is not held (held() false, retry_after()
  /// set), as Limiter::acquire() returns a denial. Throws Cancelled on a stop request, as
  /// Limiter::acquire() does; nothing is held then.
  Task<Lease> acquire(std::string key, std::int64_t permits = 1, AcquireOptions options = {});

 private:
  std::shared_ptr<detail::LeaseIssuer> issuer_;
};

}  // namespace redlimit
