#pragma once

#include <spdlog/spdlog.h>
#include <uv.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "limiter/backend.hpp"
#include "limiter/local_backend.hpp"
#include "limiter/owned_acquire_options.hpp"
#include "redis/command_dispatcher.hpp"
#include "redlimit/semaphore.hpp"
#include "runtime/loop_turn.hpp"

namespace redlimit::detail {

/// What a grant came to: a lease held, or a refusal with when to ask again.
struct Grant {
  bool granted = false;
  std::int64_t expires_at_us = 0;           ///< granted
  std::chrono::microseconds retry_after{};  ///< refused: when asking again may succeed
  Source source = Source::redis;
};

/// Issues, renews and releases the leases of one Semaphore through its backend (Redis, or in
/// process), applying the failure policy when Redis cannot answer a grant. Shared: a Lease
/// keeps it (and its backend) alive after the Semaphore is gone.
class LeaseIssuer : public std::enable_shared_from_this<LeaseIssuer> {
 public:
  /// `redis` is the client's dispatcher (for a Redis backend), or null for an in-process
  /// semaphore, whose backend cannot fail; it is kept alive as long as the issuer, since the
  /// backend sends through it. Validates `capacity` and `options` (InvalidArgument).
  LeaseIssuer(uv_loop_t* loop, std::shared_ptr<const CommandDispatcher> redis,
              std::unique_ptr<Backend> backend, std::int64_t capacity, SemaphoreOptions options,
              std::shared_ptr<spdlog::logger> logger);

  // Why `keep_alive` (the caller's reference to this issuer): a Semaphore destroyed or
  // assigned to while a call waits drops its own, and the call's frame still uses the issuer.
  Task<std::optional<Lease>> try_acquire(std::string key, std::int64_t permits,
                                         std::shared_ptr<LeaseIssuer> keep_alive);
  Task<Lease> acquire(std::string key, std::int64_t permits, OwnedAcquireOptions options,
                      std::shared_ptr<LeaseIssuer> keep_alive);
  /// Renews or releases `lease` where it was granted; nothing for Source::fail_open.
  Task<LeaseReply> run(const Lease& lease, LeaseOperation operation);
  /// Releases a lease whose owner is gone, or whose grant's reply was lost, on the backend of
  /// `source`: as the client's background work, which Client::close() waits for, or at once in
  /// process. Nothing for Source::fail_open.
  void release_in_background(Source source, std::string key, std::string lease_id,
                             std::int64_t permits);

 private:
  /// The semaphore key of `key`; throws InvalidArgument.
  std::string semaphore_key(std::string_view key) const;
  std::string new_lease_id();
  /// Asks once for `permits` on `key` under a new lease id; when Redis cannot answer, as the
  /// failure policy says. A grant whose reply was lost is released in the background.
  Task<Grant> grant(const std::string& key, const std::string& lease_id, std::int64_t permits);
  /// The backend that granted leases of `source`; null for Source::fail_open.
  Backend* backend_for(Source source) const noexcept;
  /// The request to the backend of `source` (with the capacity it enforces).
  LeaseRequest request(Source source, std::string key, std::string lease_id,
                       std::int64_t permits) const;
  Lease lease(std::string key, std::string lease_id, std::int64_t permits, const Grant& grant);

  uv_loop_t* loop_;
  /// Every grant checks it first: a caller answered without I/O (the failure policy, an
  /// in-process backend), asking again at once, gives the loop a turn regularly.
  LoopTurn turn_{loop_};
  // Why before the backend: destroyed after it, since the backend sends through it.
  std::shared_ptr<const CommandDispatcher> redis_;  ///< the client's; null for in process
  std::unique_ptr<Backend> backend_;
  std::int64_t capacity_;
  SemaphoreOptions options_;
  std::string escaped_name_;
  std::unique_ptr<LocalBackend> fallback_;  ///< local_fallback
  std::int64_t fallback_capacity_ = 1;      ///< local_fallback: local_share x capacity, >= 1
  std::shared_ptr<spdlog::logger> logger_;
  std::mt19937_64 random_;
};

}  // namespace redlimit::detail
