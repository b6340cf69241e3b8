// What a limiter answers while Redis cannot: for each failure policy and each fault, every call
// completes by its deadline with the policy's decision (its source says so), the circuit breaker
// keeps calls from each waiting a timeout, and decisions come from Redis again within 1 s after
// it is back.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <optional>
#include <string>

#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/task_group.hpp"
#include "support/lateness_probe.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

enum class Fault { stopped, killed, paused, sleeping };

struct FailureCase {
  const char* name;
  FailurePolicy::Kind policy;
  Fault fault;
};

struct Observed {
  int calls = 0;
  int from_redis = 0;
  int from_policy = 0;
  int wrong = 0;
  int fast = 0;  ///< answered in under 5 ms while Redis could not answer
  Clock::duration slowest{};
  Clock::duration recovery{};
  std::string last_wrong;
};

constexpr auto command_timeout = 100ms;

Source expected_source(FailurePolicy::Kind policy) {
  switch (policy) {
    case FailurePolicy::fail_open:
      return Source::fail_open;
    case FailurePolicy::local_fallback:
      return Source::fallback;
    case FailurePolicy::fail_closed:
      break;
  }
  return Source::fail_closed;
}

Task<void> sleep_in_redis(Client& other) {
  co_await other.command("DEBUG", "SLEEP", "0.6");
}

Task<void> exercise(Limiter& limiter, Client& other, test::RedisServer& server, FailureCase c,
                    Observed* seen) {
  uv_loop_t* loop = other.loop();
  EXPECT_EQ((co_await limiter.try_acquire("k")).source, Source::redis);
  TaskGroup background;
  switch (c.fault) {
    case Fault::stopped:
      server.pause();
      break;
    case Fault::killed:
      server.kill();
      break;
    case Fault::paused:
      server.command({"CLIENT", "PAUSE", "600", "WRITE"});
      break;
    case Fault::sleeping:
      background.add(sleep_in_redis(other));
      co_await sleep_for(loop, 5ms);  // the sleep has begun
      break;
  }
  const auto fault_started = Clock::now();
  while (Clock::now() - fault_started < 550ms) {
    const auto start = Clock::now();
    const Decision d = co_await limiter.try_acquire("k");
    const auto took = Clock::now() - start;
    ++seen->calls;
    seen->slowest = std::max(seen->slowest, took);
    if (d.source == Source::redis) {
      ++seen->from_redis;
    } else if (d.source == expected_source(c.policy)) {
      ++seen->from_policy;
      if (took < 5ms) ++seen->fast;
      const bool consistent = c.policy == FailurePolicy::fail_open ? d.allowed
                              : c.policy == FailurePolicy::fail_closed
                                  ? !d.allowed && d.retry_after > 0us
                                  : true;
      if (!consistent) {
        ++seen->wrong;
        seen->last_wrong = "an inconsistent decision from " + std::string(to_string(d.source));
      }
    } else {
      ++seen->wrong;
      seen->last_wrong = std::string(to_string(d.source));
    }
    co_await sleep_for(loop, 10ms);
  }
  // Redis comes back.
  switch (c.fault) {
    case Fault::stopped:
      server.resume();
      break;
    case Fault::killed:
      server.start();
      break;
    case Fault::paused:
    case Fault::sleeping:
      while (Clock::now() - fault_started < 600ms)
        co_await sleep_for(loop, 5ms);
      break;
  }
  const auto back = Clock::now();
  // Why not `while ((co_await ...).source ...)`: g++ 12 miscompiles co_await in a loop condition.
  for (;;) {
    const Decision d = co_await limiter.try_acquire("k");
    if (d.source == Source::redis || Clock::now() - back > 3s) break;
    co_await sleep_for(loop, 10ms);
  }
  seen->recovery = Clock::now() - back;
  co_await background.join();
}

class Failure : public test::LoopTest, public ::testing::WithParamInterface<FailureCase> {
 protected:
  test::RedisServer server_;
};

TEST_P(Failure, CallsGetThePolicyByTheirDeadlineAndRedisAgainWithinASecond) {
  ClientOptions options{.url = server_.url(),
                        .connect_timeout = 200ms,
                        .command_timeout = command_timeout,
                        .reconnect_min = 20ms,
                        .reconnect_max = 200ms};
  options.logger = std::make_shared<spdlog::logger>("quiet");  // no sinks: faults are expected
  Client client(loop(), options);
  Client other(loop(), {.url = server_.url(),
                        .command_timeout = 2s,
                        .logger = options.logger,
                        .reservation_lease = 6s});
  LimiterOptions limiter_options{.name = "failure"};
  limiter_options.on_failure.kind = GetParam().policy;
  limiter_options.on_failure.local_share = 0.5;
  Limiter limiter(client, Policy::of({Algorithm::gcra, {1000, 1s}}), limiter_options);
  Observed seen;
  // Why no Redis port: the fault stops the server, and its PINGs would count as the machine's.
  const test::LatenessProbe probe;
  run(loop(), exercise(limiter, other, server_, GetParam(), &seen));
  std::printf(
      "[ %-24s ] %d calls: %d from redis, %d %s (%d fast); slowest %lld ms; redis again "
      "after %lld ms\n",
      GetParam().name, seen.calls, seen.from_redis, seen.from_policy,
      std::string(to_string(expected_source(GetParam().policy))).c_str(), seen.fast,
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(seen.slowest).count()),
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(seen.recovery).count()));
  EXPECT_EQ(seen.wrong, 0) << seen.last_wrong;
  EXPECT_GT(seen.from_policy, 0) << "calls during the fault get the failure policy's answer";
  EXPECT_LT(seen.slowest, command_timeout + probe.slack()) << "every call by its deadline";
  EXPECT_GT(seen.fast, 0) << "the open breaker answers without waiting for a timeout";
  EXPECT_LT(seen.recovery, 1s) << "decisions come from Redis again within 1 s";
  run(loop(), client.close());
  run(loop(), other.close());
}

class LocalFallback : public test::LoopTest {
 protected:
  test::RedisServer server_;
};

// Issue 14, bug 5: the share's rounding pushed the scaled gcra's burst x period past 2^52, and
// the limiter refused a policy it accepts without a fallback.
TEST_F(LocalFallback, AcceptsEveryPolicyTheLimiterAccepts) {
  Client client(loop(), {.url = server_.url()});
  LimiterOptions options{.name = "fallback-share"};
  options.on_failure.kind = FailurePolicy::local_fallback;
  options.on_failure.local_share = 0.999;
  const Policy policy{Limit::gcra("1000/s", 10'000'000'000)};
  Limiter plain(client, policy, {.name = "fallback-share"});
  std::optional<Limiter> with_fallback;
  EXPECT_NO_THROW(with_fallback.emplace(client, policy, options));
  if (with_fallback) {
    EXPECT_NO_THROW(with_fallback->set_policy(policy));
  }
  run(loop(), client.close());
}

std::string name_of(const ::testing::TestParamInfo<FailureCase>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(
    PoliciesAndFaults, Failure,
    ::testing::Values(
        FailureCase{"closed_stopped", FailurePolicy::fail_closed, Fault::stopped},
        FailureCase{"open_stopped", FailurePolicy::fail_open, Fault::stopped},
        FailureCase{"fallback_stopped", FailurePolicy::local_fallback, Fault::stopped},
        FailureCase{"closed_killed", FailurePolicy::fail_closed, Fault::killed},
        FailureCase{"open_killed", FailurePolicy::fail_open, Fault::killed},
        FailureCase{"fallback_killed", FailurePolicy::local_fallback, Fault::killed},
        FailureCase{"closed_client_pause", FailurePolicy::fail_closed, Fault::paused},
        FailureCase{"open_client_pause", FailurePolicy::fail_open, Fault::paused},
        FailureCase{"fallback_client_pause", FailurePolicy::local_fallback, Fault::paused},
        FailureCase{"closed_debug_sleep", FailurePolicy::fail_closed, Fault::sleeping},
        FailureCase{"open_debug_sleep", FailurePolicy::fail_open, Fault::sleeping},
        FailureCase{"fallback_debug_sleep", FailurePolicy::local_fallback, Fault::sleeping}),
    name_of);

}  // namespace
}  // namespace redlimit
