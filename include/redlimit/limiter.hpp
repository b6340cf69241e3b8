#pragma once
/// @file limiter.hpp
/// Limiter: applies a Policy per key, in Redis (shared by every process) or in process.

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>

#include "redlimit/limit.hpp"
#include "redlimit/task.hpp"

namespace redlimit {

class Client;

namespace detail {
class LimiterCore;
}

/// What a limiter answers when Redis cannot answer in time.
struct FailurePolicy {
  enum Kind {
    fail_closed,     ///< deny (the default)
    fail_open,       ///< allow
    local_fallback,  ///< decide in process with local_share x each limit until Redis answers
  } kind = fail_closed;
  double local_share = 1.0;
};

struct LimiterOptions {
  /// The namespace of this limiter's keys, e.g. "sms"; 1 to 128 bytes, any bytes.
  std::string name;
  /// The first part of every key: 1 to 64 characters from [A-Za-z0-9_.-].
  std::string prefix = "rl";
  FailurePolicy on_failure{};
  /// Remember "denied until T" locally when that is provably what Redis would answer.
  bool deny_cache = true;
};

struct AcquireOptions {
  std::chrono::microseconds max_wait = std::chrono::microseconds::max();
  std::stop_token stop{};
};

/// Applies a Policy to keys (a user, an IP, an API key).
///
/// Keys in Redis are `<prefix>:{<name>:<key>}:<algorithm>:<index>`, with name and key escaped
/// so that different (name, key) pairs never share a Redis key, and every key of one decision
/// in one hash slot. Arguments are checked before any I/O (InvalidArgument, naming the field
/// and the accepted range).
///
/// Non-copyable. Use on the loop's thread. The Client must outlive the limiter.
class Limiter {
 public:
  /// A limiter whose state lives in Redis, shared by every process that uses the same name.
  Limiter(Client& client, Policy policy, LimiterOptions options);
  /// A limiter whose state lives in this process only (LocalBackend): the same algorithms,
  /// no Redis. Idle keys are evicted, so memory stays bounded.
  Limiter(uv_loop_t* loop, Policy policy, LimiterOptions options);
  ~Limiter();
  Limiter(const Limiter&) = delete;
  Limiter& operator=(const Limiter&) = delete;

  /// Takes `permits` for `key` now if every limit allows it; never waits.
  Task<Decision> try_acquire(std::string key, std::int64_t permits = 1);
  /// try_acquire() on the limiter's own name as the key: one shared resource.
  Task<Decision> try_acquire(std::int64_t permits = 1);
  /// The state of `key` as a decision for one permit; consumes nothing.
  Task<Decision> peek(std::string key);
  /// Forgets the state of `key`: it starts again full.
  Task<void> reset(std::string key);
  /// Replaces the policy from the next call on. State carries over per limit position and
  /// algorithm (see docs/algorithms.md): changing a rate never resets a key and never frees a
  /// burst of permits.
  void set_policy(Policy policy);
  /// The policy in effect.
  const Policy& policy() const noexcept;

 private:
  std::unique_ptr<detail::LimiterCore> core_;
};

}  // namespace redlimit
