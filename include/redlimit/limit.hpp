#pragma once
/// @file limit.hpp
/// What a limit is (algorithm, rate, burst, window), a policy of several limits, and the
/// decision a limiter returns.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace redlimit {

/// The rate limiting algorithms. See docs/algorithms.md for what each guarantees.
enum class Algorithm {
  gcra,                    ///< generic cell rate algorithm: smooth rate, bursts up to `burst`
  token_bucket,            ///< tokens refill continuously up to `burst`
  leaky_bucket,            ///< a shaper: departures exactly period/permits apart
  fixed_window,            ///< a counter per window of `period`
  sliding_window_log,      ///< exact for every trailing window; permits <= 10,000
  sliding_window_counter,  ///< two-window weighted estimate; cheap for large limits
};

/// The name used in keys, scripts and messages, e.g. "token_bucket".
std::string_view to_string(Algorithm algorithm) noexcept;

/// `permits` per `period`, e.g. 400 per second.
struct Rate {
  std::int64_t permits = 0;
  std::chrono::microseconds period{0};

  /// Parses "<permits>/<period>": permits a decimal integer, period an optional decimal count
  /// and a unit: us, ms, s, m or min, h, d or day. Examples: "400/s", "100/min", "5000/h",
  /// "1/day", "5/250ms", "7/3s". Throws InvalidArgument for anything else (signs, spaces,
  /// "inf", "nan", hex, a zero period, an unknown unit).
  static Rate parse(std::string_view text);

  friend bool operator==(const Rate&, const Rate&) = default;
};

/// "400/1s"-style text of a rate.
std::string to_string(const Rate& rate);

/// Where fixed windows start.
enum class Window {
  aligned,   ///< at multiples of the period since the Unix epoch (all keys share boundaries)
  anchored,  ///< at the first request after the previous window ended
};

/// One limit: an algorithm, a rate and a capacity.
///
/// The factories name what each parameter means for the algorithm; a rate is a Rate or its text
/// ("10/s", see Rate::parse, which throws InvalidArgument for bad text):
/// `Limit::gcra("10/s", 20)`, `Limit::fixed_window("1000/day")`. The remaining fields are
/// checked when a Limiter takes the policy.
struct Limit {
  Algorithm algorithm = Algorithm::gcra;
  Rate rate;
  /// Capacity for gcra and token_bucket, queue size for leaky_bucket; 0 means "the same as
  /// rate.permits". The window algorithms ignore it.
  std::int64_t burst = 0;
  Window window = Window::aligned;  ///< fixed_window only

  /// GCRA at `rate`, admitting bursts of up to `burst` permits (0: rate.permits).
  static Limit gcra(Rate rate, std::int64_t burst = 0);
  static Limit gcra(std::string_view rate, std::int64_t burst = 0);
  /// A token bucket refilled at `rate`, holding up to `burst` tokens (0: rate.permits).
  static Limit token_bucket(Rate rate, std::int64_t burst = 0);
  static Limit token_bucket(std::string_view rate, std::int64_t burst = 0);
  /// A leaky bucket draining at `rate`, queueing up to `queue` permits (0: rate.permits).
  static Limit leaky_bucket(Rate rate, std::int64_t queue = 0);
  static Limit leaky_bucket(std::string_view rate, std::int64_t queue = 0);
  /// rate.permits per window of rate.period, the windows placed as `window` says.
  static Limit fixed_window(Rate rate, Window window = Window::aligned);
  static Limit fixed_window(std::string_view rate, Window window = Window::aligned);
  /// At most rate.permits in every trailing rate.period, exactly (a log of admissions).
  static Limit sliding_window_log(Rate rate);
  static Limit sliding_window_log(std::string_view rate);
  /// At most about rate.permits per trailing rate.period (two windows, weighted).
  static Limit sliding_window_counter(Rate rate);
  static Limit sliding_window_counter(std::string_view rate);

  friend bool operator==(const Limit&, const Limit&) = default;
};

/// Who shares a policy's state (Redisson's RateType).
enum class Scope {
  overall,     ///< one state per key, shared by every process and client
  per_client,  ///< each Client its own state per key, under the same (central) policy
};

/// What a key's stored state becomes when its policy changes (Bucket4j's
/// TokensInheritanceStrategy). Window algorithms carry their counts of an overlapping window.
/// The values are what the policy store keeps.
enum class Carry {
  /// the permits available at the change, capped at the new capacity; a leaky bucket keeps the
  /// permits queued then, which depart at the new rate (only a change of rate moves its next
  /// departure)
  as_is = 0,
  proportional = 1,  ///< the permits available scaled by new capacity / old capacity
  reset = 2,         ///< every key starts full (only when asked)
};

/// Limits that apply together: a request passes only if every limit allows it, and then
/// counts against all of them, atomically.
///
/// `Policy{Limit::gcra("10/s"), Limit::fixed_window("1000/day")}`, or from text with parse().
struct Policy {
  std::vector<Limit> limits;
  /// Who shares the state: all (overall) or each Client its own (per_client).
  Scope scope = Scope::overall;

  /// No limits (a Limiter refuses it).
  Policy() = default;
  /// The limits in order: Policy::limits[i] is the limit a Decision::binding of i names.
  Policy(std::initializer_list<Limit> list) : limits(list) {}
  Policy(std::vector<Limit> list) : limits(std::move(list)) {}

  /// A policy of one limit.
  static Policy of(Limit limit) { return Policy{limit}; }

  /// Parses the text form: limits separated by ';', each `<algorithm> <rate>` followed by its
  /// options: `burst <n>` (gcra, token_bucket; ignored by the window algorithms), `queue <n>`
  /// (leaky_bucket), `anchored` or `aligned` (fixed_window's Window). Words are separated by
  /// spaces; a rate is Rate::parse's text. Example: "gcra 10/s burst 20; fixed_window 1000/day".
  /// A clause `scope per_client` (or `scope overall`, the default) in place of a limit sets
  /// the scope: "gcra 10/s; scope per_client".
  /// Throws InvalidArgument, naming the limit and the word, for anything else (an empty text
  /// included). The limits' values are checked when a Limiter takes the policy.
  static Policy parse(std::string_view text);

  friend bool operator==(const Policy&, const Policy&) = default;
};

/// The text form of `policy` (see Policy::parse), which parses back to an equal policy: each
/// field that differs from its default is written, e.g.
/// "gcra 10/1s burst 20; fixed_window 1000/1d", and "; scope per_client" when it is.
std::string to_string(const Policy& policy);
/// The text form of one limit, as a policy of it would have.
std::string to_string(const Limit& limit);
/// Checks `policy`'s values as a Limiter checks them when it takes the policy, without any I/O
/// (for a program that reads policies before it makes limiters). Throws InvalidArgument naming
/// the limit and the value it refuses.
void check_policy(const Policy& policy);

/// Where a decision came from.
enum class Source {
  redis,        ///< the script in Redis
  local,        ///< the in-process LocalBackend
  deny_cache,   ///< a remembered Redis denial, still in force
  fallback,     ///< Redis could not answer; the local fallback limiter decided
  fail_open,    ///< Redis could not answer; allowed by policy
  fail_closed,  ///< Redis could not answer; denied by policy
};

std::string_view to_string(Source source) noexcept;

/// The answer to one request.
struct Decision {
  bool allowed = false;
  std::int64_t limit = 0;      ///< capacity of the binding limit
  std::int64_t remaining = 0;  ///< permits left after this decision, binding limit
  /// 0 when allowed; else the earliest time this request could pass (exact, rounded up, > 0).
  std::chrono::microseconds retry_after{0};
  /// Time until the binding limit is full (idle) again.
  std::chrono::microseconds reset_after{0};
  std::chrono::microseconds waited{0};  ///< acquire(): time spent suspended
  /// The Redis TIME (microseconds since the epoch) the decision used; 0 if not from Redis.
  std::int64_t server_time_us = 0;
  /// Index in Policy::limits of the deciding limit: for a denial the one with the longest
  /// retry_after, for an admission the one with the fewest permits remaining.
  std::size_t binding = 0;
  /// try_acquire_all(): the index of the claim whose limit `binding` decided (0 otherwise).
  std::size_t claim = 0;
  Source source = Source::redis;
  /// The version of the stored policy the decision was made under (see PolicyStore); 0 for a
  /// limiter given its policy in process.
  std::int64_t policy_version = 0;
  /// Shadow mode (LimiterOptions::shadow): the limit denied this request, and it was allowed
  /// anyway; retry_after is the limit's.
  bool shadow_denied = false;

  /// server_time_us as a time point of the system clock (the epoch when not from Redis).
  std::chrono::sys_time<std::chrono::microseconds> server_time() const noexcept {
    return std::chrono::sys_time<std::chrono::microseconds>(
        std::chrono::microseconds(server_time_us));
  }
};

}  // namespace redlimit
