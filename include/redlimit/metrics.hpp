#pragma once
/// @file metrics.hpp
/// Metrics: what the limiters and the Redis client did, as counters, gauges and histograms, a
/// snapshot to read them, and their Prometheus text exposition. No metrics library is needed.

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/limit.hpp"

namespace redlimit {

namespace detail {
struct LimiterMetrics;
struct RedisMetrics;
class MetricsRegistry;
}  // namespace detail

/// The number of Source values (Source::fail_closed is the last).
inline constexpr std::size_t source_count = 6;

/// A histogram as read: per bucket, how many observations were at most its upper bound
/// (cumulative, as Prometheus counts them; the last bound is +Inf), their count and their sum.
struct HistogramSnapshot {
  /// The buckets' upper bounds, ascending; the last is +Inf.
  std::vector<double> upper_bounds;
  /// Per bucket, the observations at most its bound.
  std::vector<std::uint64_t> cumulative_counts;
  /// All observations (the +Inf bucket's count).
  std::uint64_t count = 0;
  /// The sum of the observed values.
  double sum = 0;
};

/// Why a call of a limiter ended without a decision (besides Cancelled, counted apart).
enum class CallError {
  invalid_argument,  ///< InvalidArgument (bad input, refused before any I/O)
  policy_not_found,  ///< PolicyNotFound (a follower with no stored policy)
  unavailable,       ///< Unavailable (Redis could not answer and nothing else did)
  other,             ///< any other error
};
/// The number of CallError values.
inline constexpr std::size_t call_error_count = 4;
/// The label of `error` in the exposition ("invalid_argument", ...).
std::string_view to_string(CallError error) noexcept;

/// What the limiters of one name did (all limiters of that name counting into one Metrics).
struct LimiterStats {
  /// The limiters' name (LimiterOptions::name; limiters of one name under different prefixes
  /// count together).
  std::string name;
  /// Decisions returned by try_acquire() and acquire(), by [allowed][source]: the limit's
  /// answer, so a shadow limiter's would-be denial counts as denied (see shadow_denials), and
  /// a shadow acquire() that would have waited as allowed.
  std::array<std::array<std::uint64_t, source_count>, 2> decisions{};
  /// Decisions the limit denied that shadow mode allowed (LimiterOptions::shadow); denials of
  /// the failure policy included.
  std::uint64_t shadow_denials = 0;
  /// Calls ended by their stop token (Cancelled), or abandoned: their task destroyed before
  /// they ended.
  std::uint64_t cancelled = 0;
  /// Admissions Redis answered later than the call's AcquireOptions::max_lateness allowed: not
  /// used (the failure policy answered instead).
  std::uint64_t late_admissions = 0;
  /// Calls that ended with an error, by CallError.
  std::array<std::uint64_t, call_error_count> errors{};
  /// acquire(): each call's Decision::waited, in seconds: from the call to its decision, the
  /// wait for its permits included (0 for one that did not wait). In shadow mode, the wait it
  /// would have had.
  HistogramSnapshot wait_seconds;
  /// try_acquire() and acquire() calls under way.
  std::int64_t in_flight = 0;
  /// acquire() calls suspended, waiting for their permits.
  std::int64_t waiters = 0;
  /// The version of the stored policy these limiters follow (PolicyStore: the name's latest
  /// change they read), or 0 for a policy given in code (Limiter(client, policy, options),
  /// set_policy()). Several limiters of one name: the one that changed last.
  std::int64_t policy_version = 0;
  /// The limits of the policy in force, as configured (a follower's: the name's policy, not a
  /// key's override; empty before its first read, or when none is stored).
  std::vector<Limit> policy_limits;

  /// decisions[allowed][source].
  std::uint64_t decided(bool allowed, Source source) const noexcept {
    return decisions[allowed ? 1 : 0][static_cast<std::size_t>(source)];
  }
};

/// Why a Redis command failed, for RedisStats::errors.
enum class RedisError {
  connection,    ///< ConnectionError: no connection, or it was lost
  timeout,       ///< TimeoutError: no reply by the command's deadline
  overloaded,    ///< Overloaded: max_pending commands were outstanding
  circuit_open,  ///< CircuitOpen: the server's breaker refused the call, or its failure opened it
  reply,         ///< an error reply (ReplyError, ConfigError for permissions, OOM, ...)
  protocol,      ///< ProtocolError: a reply the library cannot read
};
/// The number of RedisError values.
inline constexpr std::size_t redis_error_count = 6;
/// The label of `error` in the exposition ("connection", ...).
std::string_view to_string(RedisError error) noexcept;

/// The state of a server's circuit breaker (see docs/failures.md).
enum class BreakerState { closed, open, half_open };
/// The label of `state` in the exposition ("closed", "open", "half_open").
std::string_view to_string(BreakerState state) noexcept;

/// What the Redis clients counting into one Metrics did.
struct RedisStats {
  /// Commands and script calls written to Redis (a batch of coalesced calls is one).
  std::uint64_t round_trips = 0;
  /// Commands that failed, by RedisError (a call that failed once is counted once).
  std::array<std::uint64_t, redis_error_count> errors{};
  /// Connections established again after an established one was lost or dropped (a first
  /// connection is not counted, even after failed attempts).
  std::uint64_t reconnects = 0;
  /// Scripts sent with their source (EVAL): at each one's first use on a connection (a new
  /// connection, or one to a server that restarted), and again when a server answered NOSCRIPT.
  std::uint64_t scripts_loaded = 0;
  /// Script calls (a batch counts once) whose writes too few replicas acknowledged within
  /// ClientOptions::replica_timeout: the calls that wrote failed as Unavailable.
  std::uint64_t replica_shortfalls = 0;
  /// Calls per script call sent (1 for a call sent alone).
  HistogramSnapshot batch_size;
  /// Commands waiting for a connection or a reply.
  std::int64_t commands_in_flight = 0;
  /// Servers whose circuit breaker is in each BreakerState.
  std::array<std::int64_t, 3> breakers{};
};

/// Everything one Metrics holds, read at once (each value atomically; the set is not one
/// instant).
struct MetricsSnapshot {
  std::vector<LimiterStats> limiters;  ///< one per limiter name, in order of name
  RedisStats redis;
};

/// Where limiters and clients count what they do. A Client has one (ClientOptions::metrics, or
/// its own), and the limiters made from it count into it; an in-process limiter counts into
/// LimiterOptions::metrics, if set. Several clients and limiters may share one: limiters of the
/// same name then add up. Counting and reading are thread-safe (atomic counters), so a snapshot
/// or the exposition may be taken from any thread.
class Metrics {
 public:
  /// Everything at zero, no limiter name yet.
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  /// Every value now.
  MetricsSnapshot snapshot() const;
  /// The Prometheus text exposition (format 0.0.4) of snapshot(): see prometheus_text().
  std::string prometheus_text() const;

  /// Internal: the counters of the limiters named `name` (made on first use; they live as long
  /// as this object).
  detail::LimiterMetrics& limiter(std::string_view name);
  /// Internal: the counters of the Redis clients.
  detail::RedisMetrics& redis() noexcept;

 private:
  std::unique_ptr<detail::MetricsRegistry> registry_;
};

/// The Prometheus text exposition (format 0.0.4, `text/plain; version=0.0.4`) of `snapshot`:
/// redlimit_decisions_total{limiter,result,source}, redlimit_shadow_denials_total{limiter},
/// redlimit_cancelled_total{limiter}, redlimit_late_admissions_total{limiter},
/// redlimit_call_errors_total{limiter,error},
/// redlimit_wait_seconds{limiter} (histogram), redlimit_calls_in_flight{limiter},
/// redlimit_waiters{limiter}, redlimit_redis_round_trips_total, redlimit_redis_errors_total{type},
/// redlimit_redis_reconnects_total, redlimit_redis_scripts_loaded_total,
/// redlimit_redis_batch_size (histogram), redlimit_redis_commands_in_flight and
/// redlimit_redis_circuit_breakers{state}. docs/operations.md lists their meanings. Keys are
/// never labels: a limiter's name is.
std::string prometheus_text(const MetricsSnapshot& snapshot);

}  // namespace redlimit
