#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "limiter/owned_acquire_options.hpp"
#include "redis/command_dispatcher.hpp"
#include "redlimit/semaphore.hpp"

namespace redlimit::detail {

/// What the semaphore script answered.
struct LeaseReply {
  bool granted = false;
  std::int64_t now_us = 0;
  std::int64_t expires_or_free_at_us = 0;  ///< granted: the expiry; else when a permit frees
};

/// The implementation behind Semaphore and Lease. Shared: a Lease keeps it (and the release it
/// may spawn) alive after the Semaphore is gone.
class SemaphoreCore : public std::enable_shared_from_this<SemaphoreCore> {
 public:
  SemaphoreCore(CommandDispatcher& client, std::int64_t capacity, SemaphoreOptions options);

  Task<std::optional<Lease>> try_acquire(std::string key, std::int64_t permits);
  Task<Lease> acquire(std::string key, std::int64_t permits, OwnedAcquireOptions options);
  /// The script's answer for `op` on `redis_key`; `lease_id` is the client-made id.
  Task<LeaseReply> call(std::string op, std::string redis_key, std::string lease_id,
                        std::int64_t permits);
  uv_loop_t* loop() const noexcept { return client_.loop(); }
  CommandDispatcher& client() noexcept { return client_; }

 private:
  std::string redis_key(std::string_view key) const;
  std::string new_lease_id();
  void check_permits(std::int64_t permits) const;
  /// Grants once; on a lost reply, releases the lease id in the background and rethrows.
  Task<LeaseReply> grant(std::string redis_key, std::string lease_id, std::int64_t permits);

  CommandDispatcher& client_;
  std::int64_t capacity_;
  std::string prefix_;
  std::string escaped_name_;
  std::chrono::microseconds lease_ttl_;
  std::mt19937_64 random_;
};

}  // namespace redlimit::detail
