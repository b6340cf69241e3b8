#pragma once
/// @file acquire_options.hpp
/// AcquireOptions: how long Limiter::acquire() may wait, and how to cancel it.

#include <chrono>
#include <stop_token>
#include <type_traits>

namespace redlimit {

/// A reference to the caller's std::stop_token, read when acquire() is called.
///
/// Why a reference and not a std::stop_token: AcquireOptions is written as a braced temporary
/// inside a co_await (`co_await limiter.acquire(key, 1, {.stop = token})`), and g++ 12 destroys
/// such a temporary twice; std::stop_token's destructor releases a reference count, so a
/// second run frees the stop state under the caller's feet. A plain pointer has nothing to
/// destroy. acquire() copies the token before it returns, while the referenced token (a named
/// one, or the temporary of `source.get_token()` in the same expression) is certainly alive.
///
/// Build it in the call. A kept copy is only as good as the token it refers to: keep that
/// token alive as long (assigning a temporary token, `options.stop = source.get_token();`,
/// does not compile for that reason).
class StopTokenRef {
 public:
  /// No token: the call cannot be cancelled.
  constexpr StopTokenRef() noexcept = default;
  /// Refers to `token` (implicit, so that `.stop = token` reads as a std::stop_token would).
  constexpr StopTokenRef(const std::stop_token& token) noexcept : token_(&token) {}
  /// Refers to `token` from now on.
  constexpr StopTokenRef& operator=(const std::stop_token& token) noexcept {
    token_ = &token;
    return *this;
  }
  /// A temporary token would die at the end of the statement.
  StopTokenRef& operator=(std::stop_token&& token) = delete;

  /// A copy of the referenced token, or a token that never stops.
  std::stop_token token() const noexcept { return token_ != nullptr ? *token_ : std::stop_token{}; }

 private:
  const std::stop_token* token_ = nullptr;
};

/// How long acquire() may wait, and how to cancel it. Built in the call:
/// `co_await limiter.acquire(key, 1, {.max_wait = 2s, .stop = token})`.
///
/// Trivially destructible, so building it inside a co_await expression is safe with g++ 12.
/// A kept AcquireOptions refers to the std::stop_token it was given: keep that token alive
/// until the acquire() call that uses it has returned.
struct AcquireOptions {
  /// Give up (a denial, nothing taken) if the permits cannot be had within this. The default
  /// waits as long as it takes; a reservation whose slot would lie past 2^52 us since the epoch
  /// (the year 2112), where the scripts' times stop being exact, throws InvalidArgument.
  std::chrono::microseconds max_wait = std::chrono::microseconds::max();
  /// A stop request ends the wait with Cancelled and gives a reservation back. Request it on
  /// the loop's thread. acquire() keeps its own copy of the token.
  StopTokenRef stop{};
  /// Use admitted permits no later than this after the time Redis admitted them for (their
  /// reserved slot, or the decision's own time): an answer that comes later (held by a WAIT for
  /// replicas, a stalled network or server) is not used. The failure policy answers instead,
  /// as when Redis did not answer; the permits stay taken, or are given back while their slot
  /// is still ahead. It bounds how much later than Redis spaced them the permits reach what
  /// they guard, so that late answers cannot arrive in a bunch (docs/failures.md, "Late
  /// answers"). Measured from when the call was sent, so it must exceed a round trip. The
  /// default never checks; it must be positive. Limiter::acquire() and acquire_all() only (a
  /// semaphore's lease has no slot).
  std::chrono::microseconds max_lateness = std::chrono::microseconds::max();
};

static_assert(std::is_trivially_destructible_v<AcquireOptions>,
              "a braced AcquireOptions inside a co_await must survive g++ 12 destroying it twice");

}  // namespace redlimit
