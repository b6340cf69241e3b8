// Metrics: the instruments (counters, gauges, histograms), the snapshot, the Prometheus text
// exposition (format 0.0.4), the circuit breakers' gauge and how Redis errors are counted.
#include "redlimit/metrics.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "metrics/instruments.hpp"
#include "redis/circuit_breaker.hpp"
#include "redis/error_count.hpp"
#include "redis/pending_count.hpp"
#include "redlimit/errors.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

constexpr double inf = std::numeric_limits<double>::infinity();

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

/// The samples of `text` whose line starts with `prefix`.
std::vector<std::string> samples_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> found;
  for (const std::string& line : lines_of(text)) {
    if (line.starts_with(prefix)) found.push_back(line);
  }
  return found;
}

TEST(PrometheusText, WritesAKnownSnapshotExactly) {
  MetricsSnapshot snapshot;
  LimiterStats sms;
  sms.name = "sms";
  sms.decisions[1][static_cast<std::size_t>(Source::redis)] = 7;
  sms.decisions[0][static_cast<std::size_t>(Source::deny_cache)] = 3;
  sms.shadow_denials = 1;
  sms.cancelled = 2;
  sms.late_admissions = 6;
  sms.errors[static_cast<std::size_t>(CallError::unavailable)] = 4;
  sms.wait_seconds = {{0.25, inf}, {1, 3}, 3, 1.5};
  sms.in_flight = 5;
  sms.waiters = 1;
  sms.policy_version = 3;
  sms.policy_limits = {Limit::gcra("400/s"), Limit::fixed_window("100000/day")};
  snapshot.limiters.push_back(sms);
  snapshot.redis.round_trips = 12;
  snapshot.redis.errors[static_cast<std::size_t>(RedisError::timeout)] = 2;
  snapshot.redis.reconnects = 1;
  snapshot.redis.scripts_loaded = 3;
  snapshot.redis.replica_shortfalls = 2;
  snapshot.redis.batch_size = {{1, 2, inf}, {4, 4, 5}, 5, 14};
  snapshot.redis.commands_in_flight = 6;
  snapshot.redis.breakers = {2, 1, 0};

  EXPECT_EQ(
      prometheus_text(snapshot),
      R"(# HELP redlimit_decisions_total Decisions of try_acquire() and acquire(), by the limit's answer and where it came from.
# TYPE redlimit_decisions_total counter
redlimit_decisions_total{limiter="sms",result="denied",source="redis"} 0
redlimit_decisions_total{limiter="sms",result="denied",source="local"} 0
redlimit_decisions_total{limiter="sms",result="denied",source="deny_cache"} 3
redlimit_decisions_total{limiter="sms",result="denied",source="fallback"} 0
redlimit_decisions_total{limiter="sms",result="denied",source="fail_open"} 0
redlimit_decisions_total{limiter="sms",result="denied",source="fail_closed"} 0
redlimit_decisions_total{limiter="sms",result="allowed",source="redis"} 7
redlimit_decisions_total{limiter="sms",result="allowed",source="local"} 0
redlimit_decisions_total{limiter="sms",result="allowed",source="deny_cache"} 0
redlimit_decisions_total{limiter="sms",result="allowed",source="fallback"} 0
redlimit_decisions_total{limiter="sms",result="allowed",source="fail_open"} 0
redlimit_decisions_total{limiter="sms",result="allowed",source="fail_closed"} 0
# HELP redlimit_shadow_denials_total Decisions the limit denied that shadow mode allowed.
# TYPE redlimit_shadow_denials_total counter
redlimit_shadow_denials_total{limiter="sms"} 1
# HELP redlimit_cancelled_total Calls ended by their stop token, or abandoned (their task destroyed) before they ended.
# TYPE redlimit_cancelled_total counter
redlimit_cancelled_total{limiter="sms"} 2
# HELP redlimit_late_admissions_total Admissions answered later than the call's max_lateness allowed, not used.
# TYPE redlimit_late_admissions_total counter
redlimit_late_admissions_total{limiter="sms"} 6
# HELP redlimit_call_errors_total Limiter calls that ended with an error instead of a decision, by error.
# TYPE redlimit_call_errors_total counter
redlimit_call_errors_total{limiter="sms",error="invalid_argument"} 0
redlimit_call_errors_total{limiter="sms",error="policy_not_found"} 0
redlimit_call_errors_total{limiter="sms",error="unavailable"} 4
redlimit_call_errors_total{limiter="sms",error="other"} 0
# HELP redlimit_wait_seconds Time from each acquire() call to its decision (0 for one that did not wait).
# TYPE redlimit_wait_seconds histogram
redlimit_wait_seconds_bucket{limiter="sms",le="0.25"} 1
redlimit_wait_seconds_bucket{limiter="sms",le="+Inf"} 3
redlimit_wait_seconds_sum{limiter="sms"} 1.5
redlimit_wait_seconds_count{limiter="sms"} 3
# HELP redlimit_calls_in_flight try_acquire() and acquire() calls under way.
# TYPE redlimit_calls_in_flight gauge
redlimit_calls_in_flight{limiter="sms"} 5
# HELP redlimit_waiters acquire() calls suspended, waiting for their permits.
# TYPE redlimit_waiters gauge
redlimit_waiters{limiter="sms"} 1
# HELP redlimit_policy_version The version of the stored policy the limiters follow (0: a policy given in code).
# TYPE redlimit_policy_version gauge
redlimit_policy_version{limiter="sms"} 3
# HELP redlimit_policy_limit_permits Each limit of the policy in force (by its index in the policy): the permits of its rate, per period.
# TYPE redlimit_policy_limit_permits gauge
redlimit_policy_limit_permits{limiter="sms",limit="0",algorithm="gcra"} 400
redlimit_policy_limit_permits{limiter="sms",limit="1",algorithm="fixed_window"} 100000
# HELP redlimit_policy_limit_period_seconds Each limit of the policy in force (by its index in the policy): its rate's period.
# TYPE redlimit_policy_limit_period_seconds gauge
redlimit_policy_limit_period_seconds{limiter="sms",limit="0",algorithm="gcra"} 1
redlimit_policy_limit_period_seconds{limiter="sms",limit="1",algorithm="fixed_window"} 86400
# HELP redlimit_redis_round_trips_total Commands and script calls written to Redis (a batch of coalesced calls counts once).
# TYPE redlimit_redis_round_trips_total counter
redlimit_redis_round_trips_total 12
# HELP redlimit_redis_errors_total Redis commands and script calls that failed, by the error their caller got.
# TYPE redlimit_redis_errors_total counter
redlimit_redis_errors_total{type="connection"} 0
redlimit_redis_errors_total{type="timeout"} 2
redlimit_redis_errors_total{type="overloaded"} 0
redlimit_redis_errors_total{type="circuit_open"} 0
redlimit_redis_errors_total{type="reply"} 0
redlimit_redis_errors_total{type="protocol"} 0
# HELP redlimit_redis_reconnects_total Redis connections established again after one was lost or failed.
# TYPE redlimit_redis_reconnects_total counter
redlimit_redis_reconnects_total 1
# HELP redlimit_redis_scripts_loaded_total Scripts sent with their source (EVAL): first use on a connection, or after NOSCRIPT.
# TYPE redlimit_redis_scripts_loaded_total counter
redlimit_redis_scripts_loaded_total 3
# HELP redlimit_redis_replica_shortfalls_total Script calls whose writes too few replicas acknowledged in time (WAIT).
# TYPE redlimit_redis_replica_shortfalls_total counter
redlimit_redis_replica_shortfalls_total 2
# HELP redlimit_redis_batch_size Limiter calls per script call sent to Redis (1 for a call sent alone).
# TYPE redlimit_redis_batch_size histogram
redlimit_redis_batch_size_bucket{le="1"} 4
redlimit_redis_batch_size_bucket{le="2"} 4
redlimit_redis_batch_size_bucket{le="+Inf"} 5
redlimit_redis_batch_size_sum 14
redlimit_redis_batch_size_count 5
# HELP redlimit_redis_commands_in_flight Redis commands waiting for a connection or a reply.
# TYPE redlimit_redis_commands_in_flight gauge
redlimit_redis_commands_in_flight 6
# HELP redlimit_redis_circuit_breakers Redis servers whose circuit breaker is in each state.
# TYPE redlimit_redis_circuit_breakers gauge
redlimit_redis_circuit_breakers{state="closed"} 2
redlimit_redis_circuit_breakers{state="open"} 1
redlimit_redis_circuit_breakers{state="half_open"} 0
)");
}

TEST(PrometheusText, WritesHelpAndTypeOfEveryFamilyEvenWithoutSamples) {
  const std::string text = prometheus_text(MetricsSnapshot{});
  for (const char* family :
       {"redlimit_decisions_total", "redlimit_shadow_denials_total", "redlimit_cancelled_total",
        "redlimit_late_admissions_total", "redlimit_call_errors_total", "redlimit_wait_seconds",
        "redlimit_calls_in_flight", "redlimit_waiters", "redlimit_policy_version",
        "redlimit_policy_limit_permits", "redlimit_policy_limit_period_seconds",
        "redlimit_redis_round_trips_total", "redlimit_redis_errors_total",
        "redlimit_redis_reconnects_total", "redlimit_redis_scripts_loaded_total",
        "redlimit_redis_replica_shortfalls_total", "redlimit_redis_batch_size",
        "redlimit_redis_commands_in_flight", "redlimit_redis_circuit_breakers"}) {
    EXPECT_EQ(samples_starting(text, std::string("# HELP ") + family + " ").size(), 1u) << family;
    EXPECT_EQ(samples_starting(text, std::string("# TYPE ") + family + " ").size(), 1u) << family;
  }
  EXPECT_TRUE(samples_starting(text, "redlimit_decisions_total").empty())
      << "no limiter, no sample";
  EXPECT_EQ(samples_starting(text, "redlimit_redis_batch_size_bucket"),
            std::vector<std::string>{"redlimit_redis_batch_size_bucket{le=\"+Inf\"} 0"})
      << "a histogram without buckets still has its +Inf bucket";
}

TEST(PrometheusText, NamesEveryCounterWithTotalAndNothingElse) {
  Metrics metrics;
  metrics.limiter("a");
  for (const std::string& line : lines_of(metrics.prometheus_text())) {
    if (!line.starts_with("# TYPE ")) continue;
    std::istringstream fields(line.substr(7));
    std::string name;
    std::string type;
    fields >> name >> type;
    EXPECT_EQ(name.ends_with("_total"), type == "counter") << line;
  }
}

TEST(PrometheusText, EscapesBackslashQuoteAndNewlineInALimitersName) {
  MetricsSnapshot snapshot;
  snapshot.limiters.emplace_back().name = "a\"b\\c\nd";
  const std::string text = prometheus_text(snapshot);
  EXPECT_EQ(samples_starting(text, "redlimit_waiters"),
            std::vector<std::string>{R"(redlimit_waiters{limiter="a\"b\\c\nd"} 0)"});
}

TEST(PrometheusText, KeepsValidUtf8AndReplacesEveryInvalidByteWithoutBreakingALine) {
  MetricsSnapshot snapshot;
  // é, €, 😀; then a lone continuation byte, an invalid byte, an overlong '/', a surrogate, a
  // truncated sequence at the end.
  snapshot.limiters.emplace_back().name =
      "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80|\x80|\xFF|\xC0\xAF|\xED\xA0\x80|\r\t|\xE2\x82";
  const std::string text = prometheus_text(snapshot);
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(
      samples_starting(text, "redlimit_waiters"),
      std::vector<std::string>{"redlimit_waiters{limiter=\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80|" +
                               fffd + "|" + fffd + "|" + fffd + fffd + "|" + fffd + fffd + fffd +
                               "|\r\t|" + fffd + fffd + "\"} 0"});
  for (const std::string& line : lines_of(text)) {
    EXPECT_TRUE(line.starts_with("# HELP redlimit_") || line.starts_with("# TYPE redlimit_") ||
                line.starts_with("redlimit_"))
        << line;
  }
}

TEST(PrometheusText, AddsUpNamesThatDifferOnlyInBytesThatAreNotUtf8) {
  MetricsSnapshot snapshot;
  for (const std::string_view name : {"a\x80", "a\xFF", "b"}) {
    LimiterStats& stats = snapshot.limiters.emplace_back();
    stats.name = name;
    stats.decisions[1][0] = 2;
    stats.waiters = 1;
    stats.wait_seconds = {{1, inf}, {1, 2}, 2, 1.5};
  }
  const std::string text = prometheus_text(snapshot);
  const std::string fffd = "\xEF\xBF\xBD";
  // Two series with one label set would make Prometheus refuse the scrape: one of each.
  EXPECT_EQ(samples_starting(text, "redlimit_waiters"),
            (std::vector<std::string>{"redlimit_waiters{limiter=\"a" + fffd + "\"} 2",
                                      "redlimit_waiters{limiter=\"b\"} 1"}));
  EXPECT_EQ(samples_starting(text, "redlimit_decisions_total{limiter=\"a" + fffd +
                                       "\",result=\"allowed\",source=\"redis\"}"),
            (std::vector<std::string>{"redlimit_decisions_total{limiter=\"a" + fffd +
                                      "\",result=\"allowed\",source=\"redis\"} 4"}));
  EXPECT_EQ(samples_starting(text, "redlimit_wait_seconds_count{limiter=\"a"),
            (std::vector<std::string>{"redlimit_wait_seconds_count{limiter=\"a" + fffd + "\"} 4"}));
}

TEST(PrometheusText, PrintsIntegersAsIntegersAndFloatsInTheShortestFormThatReadsBack) {
  MetricsSnapshot snapshot;
  snapshot.redis.round_trips = std::numeric_limits<std::uint64_t>::max();
  snapshot.redis.commands_in_flight = -3;
  snapshot.redis.batch_size = {{1e-7, 0.1, 1e21, inf}, {0, 1, 2, 3}, 3, 0.1 + 0.2};
  const std::string text = prometheus_text(snapshot);
  EXPECT_EQ(samples_starting(text, "redlimit_redis_round_trips_total "),
            std::vector<std::string>{"redlimit_redis_round_trips_total 18446744073709551615"});
  EXPECT_EQ(samples_starting(text, "redlimit_redis_commands_in_flight "),
            std::vector<std::string>{"redlimit_redis_commands_in_flight -3"});
  EXPECT_EQ(samples_starting(text, "redlimit_redis_batch_size"),
            (std::vector<std::string>{
                "redlimit_redis_batch_size_bucket{le=\"1e-07\"} 0",
                "redlimit_redis_batch_size_bucket{le=\"0.1\"} 1",
                "redlimit_redis_batch_size_bucket{le=\"1e+21\"} 2",
                "redlimit_redis_batch_size_bucket{le=\"+Inf\"} 3",
                "redlimit_redis_batch_size_sum 0.30000000000000004",
                "redlimit_redis_batch_size_count 3",
            }));
}

TEST(Metrics, CountsAndReadsCountersAndGauges) {
  detail::Counter counter;
  counter.add();
  counter.add(41);
  EXPECT_EQ(counter.value(), 42u);
  detail::Gauge gauge;
  gauge.add(3);
  gauge.add(-5);
  EXPECT_EQ(gauge.value(), -2);
}

TEST(Metrics, CountsHistogramObservationsCumulativelyUpToInf) {
  static constexpr std::array<double, 3> bounds{1, 2, 4};
  detail::Histogram histogram(bounds);
  for (const double value : {0.5, 1.0, 1.5, 4.0, 9.0})
    histogram.observe(value);
  const HistogramSnapshot read = histogram.snapshot();
  EXPECT_EQ(read.upper_bounds, (std::vector<double>{1, 2, 4, inf}));
  EXPECT_EQ(read.cumulative_counts, (std::vector<std::uint64_t>{2, 3, 4, 5}))
      << "a value equal to a bound counts in that bound's bucket";
  EXPECT_EQ(read.count, 5u);
  EXPECT_DOUBLE_EQ(read.sum, 16.0);

  MetricsSnapshot snapshot;
  snapshot.redis.batch_size = read;
  EXPECT_EQ(samples_starting(prometheus_text(snapshot), "redlimit_redis_batch_size_bucket"),
            (std::vector<std::string>{
                "redlimit_redis_batch_size_bucket{le=\"1\"} 2",
                "redlimit_redis_batch_size_bucket{le=\"2\"} 3",
                "redlimit_redis_batch_size_bucket{le=\"4\"} 4",
                "redlimit_redis_batch_size_bucket{le=\"+Inf\"} 5",
            }));
}

TEST(Metrics, AddsUpLimitersOfOneNameAndListsNamesInOrder) {
  Metrics metrics;
  metrics.limiter("b").decisions[1][0].add(2);
  metrics.limiter("a").cancelled.add();
  metrics.limiter("a").late_admissions.add();
  metrics.limiter("b").decisions[1][0].add(3);
  const MetricsSnapshot snapshot = metrics.snapshot();
  ASSERT_EQ(snapshot.limiters.size(), 2u);
  EXPECT_EQ(snapshot.limiters[0].name, "a");
  EXPECT_EQ(snapshot.limiters[0].cancelled, 1u);
  EXPECT_EQ(snapshot.limiters[0].late_admissions, 1u);
  EXPECT_EQ(snapshot.limiters[1].name, "b");
  EXPECT_EQ(snapshot.limiters[1].decided(true, Source::redis), 5u);
  EXPECT_EQ(snapshot.limiters[1].wait_seconds.upper_bounds.back(), inf);
  EXPECT_EQ(&metrics.limiter("b"), &metrics.limiter("b")) << "made once, then the same";
}

TEST(Metrics, TakesASnapshotFromAnotherThreadWhileCounting) {
  Metrics metrics;
  constexpr int min_snapshots = 200;
  constexpr std::uint64_t new_names_until = 100000;  // a new limiter name every 1000 rounds
  std::atomic<int> snapshots{0};
  std::atomic<bool> done{false};
  std::uint64_t rounds = 0;
  // Why until enough snapshots: the snapshots must overlap the counting, however the two
  // threads are scheduled.
  std::thread counting([&] {
    detail::LimiterMetrics& limiter = metrics.limiter("busy");
    detail::RedisMetrics& redis = metrics.redis();
    for (; rounds < new_names_until || snapshots < min_snapshots; ++rounds) {
      limiter.decisions[1][0].add();
      limiter.wait_seconds.observe(static_cast<double>(rounds % 7) / 100);
      redis.round_trips.add();
      redis.commands_in_flight.add(1);
      redis.commands_in_flight.add(-1);
      if (rounds < new_names_until && rounds % 1000 == 0) {
        metrics.limiter("name " + std::to_string(rounds / 1000));
      }
    }
    done = true;
  });
  std::uint64_t last_decisions = 0;
  std::uint64_t last_round_trips = 0;
  while (!done) {
    const MetricsSnapshot snapshot = metrics.snapshot();
    EXPECT_FALSE(prometheus_text(snapshot).empty());
    ++snapshots;
    EXPECT_GE(snapshot.redis.round_trips, last_round_trips) << "a counter never goes back";
    last_round_trips = snapshot.redis.round_trips;
    for (const LimiterStats& limiter : snapshot.limiters) {
      EXPECT_EQ(limiter.wait_seconds.cumulative_counts.back(), limiter.wait_seconds.count)
          << "the +Inf bucket is the count";
      if (limiter.name != "busy") continue;
      EXPECT_GE(limiter.decided(true, Source::redis), last_decisions);
      last_decisions = limiter.decided(true, Source::redis);
    }
    EXPECT_GE(snapshot.redis.commands_in_flight, 0);
    EXPECT_LE(snapshot.redis.commands_in_flight, 1);
  }
  counting.join();
  const MetricsSnapshot last = metrics.snapshot();
  EXPECT_EQ(last.redis.round_trips, rounds);
  EXPECT_EQ(last.redis.commands_in_flight, 0);
  EXPECT_EQ(last.limiters.size(), 1 + new_names_until / 1000);
  EXPECT_EQ(last.limiters.front().name, "busy");
  EXPECT_EQ(last.limiters.front().decided(true, Source::redis), rounds);
  EXPECT_EQ(last.limiters.front().wait_seconds.count, rounds);
}

TEST(Metrics, CountsEachCircuitBreakerUnderItsStateFromConstructionToDestruction) {
  Metrics metrics;
  detail::RedisMetrics& redis = metrics.redis();
  const auto breakers = [&metrics] { return metrics.snapshot().redis.breakers; };
  using States = std::array<std::int64_t, 3>;  // closed, open, half_open
  const auto t = detail::CircuitBreaker::Clock::now();
  {
    detail::CircuitBreaker first({.failures_to_open = 2, .open_min = 50ms}, &redis);
    detail::CircuitBreaker second({.failures_to_open = 2, .open_min = 50ms}, &redis);
    EXPECT_EQ(breakers(), (States{2, 0, 0}));
    first.failure(t);
    EXPECT_EQ(breakers(), (States{2, 0, 0})) << "one failure does not open it";
    first.failure(t);
    EXPECT_EQ(breakers(), (States{1, 1, 0}));
    ASSERT_TRUE(first.allow(t + 50ms));
    EXPECT_EQ(breakers(), (States{1, 0, 1})) << "the probe is under way";
    first.failure(t + 50ms);
    EXPECT_EQ(breakers(), (States{1, 1, 0})) << "the probe failed";
    ASSERT_TRUE(first.allow(t + 150ms));
    first.success();
    EXPECT_EQ(breakers(), (States{2, 0, 0}));
    second.failure(t);
    second.failure(t);
    EXPECT_EQ(breakers(), (States{1, 1, 0}));
  }
  EXPECT_EQ(breakers(), (States{0, 0, 0})) << "a destroyed breaker counts no more, open or not";
  detail::CircuitBreaker uncounted;
  EXPECT_EQ(breakers(), (States{0, 0, 0})) << "without metrics, nothing is counted";
}

TEST(Metrics, TakesBackAConnectionsPendingCommandsWhenItGoes) {
  detail::Gauge gauge;
  {
    detail::PendingCount first(&gauge);
    detail::PendingCount second(&gauge);
    first.increment();
    first.increment();
    second.increment();
    first.decrement();
    EXPECT_EQ(first.value(), 1u);
    EXPECT_EQ(gauge.value(), 2);
  }
  EXPECT_EQ(gauge.value(), 0);
}

TEST(Metrics, CountsEachRedisErrorUnderTheTypeItsCallerGot) {
  const auto kind_of = [](auto error) {
    return detail::redis_error_of(std::make_exception_ptr(error));
  };
  EXPECT_EQ(kind_of(ConnectionError("lost")), RedisError::connection);
  EXPECT_EQ(kind_of(TimeoutError("late")), RedisError::timeout);
  EXPECT_EQ(kind_of(Overloaded("full")), RedisError::overloaded);
  EXPECT_EQ(kind_of(CircuitOpen("open", 10ms)), RedisError::circuit_open);
  EXPECT_EQ(kind_of(ReplyError("WRONGTYPE", "WRONGTYPE wrong kind")), RedisError::reply);
  EXPECT_EQ(kind_of(ConfigError("NOPERM")), RedisError::reply);
  EXPECT_EQ(kind_of(ProtocolError("odd reply")), RedisError::protocol);
  EXPECT_EQ(kind_of(UsageError("closed client")), std::nullopt);
  EXPECT_EQ(kind_of(InvalidArgument("bad")), std::nullopt);
  EXPECT_EQ(detail::redis_error_of(nullptr), std::nullopt);

  Metrics metrics;
  detail::count_redis_error(metrics.redis(), std::make_exception_ptr(TimeoutError("late")));
  detail::count_redis_error(metrics.redis(), std::make_exception_ptr(UsageError("closed")));
  const RedisStats redis = metrics.snapshot().redis;
  EXPECT_EQ(redis.errors, (std::array<std::uint64_t, redis_error_count>{0, 1, 0, 0, 0, 0}));
}

}  // namespace
}  // namespace redlimit
