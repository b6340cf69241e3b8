// Issue 15, bug 1: callers that retry at once must not keep the loop from reading Redis's
// replies. Answers made without I/O (an open circuit breaker's failure policy, the deny cache,
// the local fallback, an in-process limiter) give the loop a turn regularly, and a reply that
// arrived in time is not judged late because the loop was busy.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <uv.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/semaphore.hpp"
#include "redlimit/task_group.hpp"
#include "support/lateness_probe.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::shared_ptr<spdlog::logger> quiet_logger() {
  return std::make_shared<spdlog::logger>("quiet");  // no sinks: faults are expected
}

long long milliseconds(Clock::duration d) {
  return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

// ---- recovery after a 1 s stop

constexpr std::int64_t rate_per_second = 200;
constexpr auto before_stop = 500ms;
constexpr auto stopped_for = 1s;
constexpr auto counted_after_resume = 5s;
constexpr auto granted_for_recovery = 1s;

struct RecoveryCase {
  const char* name;
  FailurePolicy::Kind policy;
  int coroutines;
};

struct Admissions {
  std::vector<Clock::time_point> from_redis;  ///< when each admission from Redis came back
  long long calls = 0;
};

/// Retries at once: no await in the loop but the decision's.
Task<void> retry_at_once(Limiter& limiter, Clock::time_point end, Admissions* seen) {
  while (Clock::now() < end) {
    const Decision d = co_await limiter.try_acquire("stall");
    ++seen->calls;
    if (d.allowed && d.source == Source::redis) seen->from_redis.push_back(Clock::now());
  }
}

Task<void> all_retrying(Limiter& limiter, int coroutines, Clock::time_point end, Admissions* seen) {
  TaskGroup group;
  for (int i = 0; i < coroutines; ++i)
    group.add(retry_at_once(limiter, end, seen));
  co_await group.join();
}

class StallRecovery : public test::LoopTest, public ::testing::WithParamInterface<RecoveryCase> {
 protected:
  test::RedisServer server_;
};

TEST_P(StallRecovery, RedisAdmitsAgainWithinASecondOfAOneSecondStop) {
  Client client(loop(), {.url = server_.url(), .logger = quiet_logger()});
  LimiterOptions options{.name = "stall"};
  options.on_failure.kind = GetParam().policy;
  options.on_failure.local_share = 0.5;
  Limiter limiter(client, Policy{Limit::gcra(std::to_string(rate_per_second) + "/s")}, options);
  run(loop(), client.connect());

  const auto start = Clock::now();
  std::atomic<Clock::rep> resumed_at{0};
  // Why a thread: a starved loop would run a stopping coroutine late, or never.
  std::thread stopper([&] {
    std::this_thread::sleep_until(start + before_stop);
    server_.pause();
    std::this_thread::sleep_for(stopped_for);
    server_.resume();
    resumed_at = Clock::now().time_since_epoch().count();
  });
  Admissions seen;
  const auto end = start + before_stop + stopped_for + counted_after_resume + 50ms;
  run(loop(), all_retrying(limiter, GetParam().coroutines, end, &seen));
  stopper.join();

  const Clock::time_point resumed{Clock::duration(resumed_at.load())};
  long long after_resume = 0;
  long long after_recovery = 0;
  for (const auto at : seen.from_redis) {
    if (at < resumed || at > resumed + counted_after_resume) continue;
    ++after_resume;
    if (at >= resumed + granted_for_recovery) ++after_recovery;
  }
  std::printf(
      "[ %-18s ] %lld calls; %lld admitted by redis in the %lld ms after it came back (%lld "
      "after the first second)\n",
      GetParam().name, seen.calls, after_resume, milliseconds(counted_after_resume),
      after_recovery);
  // The limit allows rate x 4 s after the second granted for recovery: at least half of it.
  const long long allowed = rate_per_second * std::chrono::duration_cast<std::chrono::seconds>(
                                                  counted_after_resume - granted_for_recovery)
                                                  .count();
  EXPECT_GE(after_recovery, allowed / 2) << "Redis decides again within 1 s of coming back";
  run(loop(), client.close());
}

std::string recovery_name(const ::testing::TestParamInfo<RecoveryCase>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(
    PoliciesAndCallers, StallRecovery,
    ::testing::Values(RecoveryCase{"closed_2", FailurePolicy::fail_closed, 2},
                      RecoveryCase{"closed_32", FailurePolicy::fail_closed, 32},
                      RecoveryCase{"open_2", FailurePolicy::fail_open, 2},
                      RecoveryCase{"open_32", FailurePolicy::fail_open, 32},
                      RecoveryCase{"fallback_2", FailurePolicy::local_fallback, 2},
                      RecoveryCase{"fallback_32", FailurePolicy::local_fallback, 32}),
    recovery_name);

// ---- no caller starves the loop

enum class Answerer { breaker_closed, breaker_open, breaker_fallback, deny_cache, in_process };

struct StarvationCase {
  const char* name;
  Answerer answerer;
};

constexpr int looping_coroutines = 32;
constexpr auto timer_delay = 10ms;
/// A timer fires on time within this, and how late the machine ran things meanwhile (a
/// LatenessProbe's slack: under the sanitizers, beside a build, 108 ms were seen). A starved loop
/// would hold it until the loopers give up, longest_loop on.
constexpr auto timer_bound = 100ms;
constexpr auto longest_loop = 1s;

struct Starvation {
  std::optional<Clock::duration> timer_fired_after;
  long long calls = 0;
};

Task<void> timer(uv_loop_t* loop, Starvation* seen) {
  const auto started = Clock::now();
  co_await sleep_for(loop, timer_delay);
  seen->timer_fired_after = Clock::now() - started;
}

/// `asker`: a Limiter or a Semaphore.
template <class Asker>
Task<void> loop_until_the_timer_fires(Asker& asker, Clock::time_point end, Starvation* seen) {
  while (!seen->timer_fired_after && Clock::now() < end) {
    const auto answer = co_await asker.try_acquire("starve");
    static_cast<void>(answer);
    ++seen->calls;
  }
}

template <class Asker>
Task<void> timer_among_loopers(uv_loop_t* loop, Asker& limiter, Starvation* seen) {
  TaskGroup group;
  group.add(timer(loop, seen));
  const auto end = Clock::now() + longest_loop;
  for (int i = 0; i < looping_coroutines; ++i)
    group.add(loop_until_the_timer_fires(limiter, end, seen));
  co_await group.join();
}

/// Takes the limiter to the state where it answers without I/O.
Task<void> answered_locally(Limiter& limiter, Answerer answerer) {
  const int calls = answerer == Answerer::deny_cache ? 10 : 5;  // past the limit, the breaker
  for (int i = 0; i < calls; ++i)
    co_await limiter.try_acquire("starve");
}

class NoCallerStarvesTheLoop : public test::LoopTest,
                               public ::testing::WithParamInterface<StarvationCase> {
 protected:
  test::RedisServer server_;
};

TEST_P(NoCallerStarvesTheLoop, ATimerFiresOnTimeWhileCallersLoopOnLocalAnswers) {
  const Answerer answerer = GetParam().answerer;
  const bool redis_down = answerer == Answerer::breaker_closed ||
                          answerer == Answerer::breaker_open ||
                          answerer == Answerer::breaker_fallback;
  const std::string url =
      redis_down ? "redis://127.0.0.1:" + std::to_string(test::free_port()) : server_.url();
  Client client(loop(), {.url = url, .logger = quiet_logger()});
  LimiterOptions options{.name = "starve"};
  if (answerer == Answerer::breaker_open) options.on_failure.kind = FailurePolicy::fail_open;
  if (answerer == Answerer::breaker_fallback) {
    options.on_failure.kind = FailurePolicy::local_fallback;
  }
  const Policy policy{Limit::fixed_window("5/min")};
  std::optional<Limiter> limiter;
  if (answerer == Answerer::in_process) {
    limiter.emplace(loop(), policy, options);
  } else {
    limiter.emplace(client, policy, options);
  }
  run(loop(), answered_locally(*limiter, answerer));

  const test::LatenessProbe probe;
  Starvation seen;
  run(loop(), timer_among_loopers(loop(), *limiter, &seen));
  ASSERT_TRUE(seen.timer_fired_after.has_value());
  std::printf("[ %-16s ] a %lld ms timer fired after %lld ms, among %lld calls\n", GetParam().name,
              milliseconds(timer_delay), milliseconds(*seen.timer_fired_after), seen.calls);
  EXPECT_LT(*seen.timer_fired_after, timer_bound + probe.slack());
  limiter.reset();
  run(loop(), client.close());
}

std::string starvation_name(const ::testing::TestParamInfo<StarvationCase>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(
    LocalAnswers, NoCallerStarvesTheLoop,
    ::testing::Values(StarvationCase{"breaker_closed", Answerer::breaker_closed},
                      StarvationCase{"breaker_open", Answerer::breaker_open},
                      StarvationCase{"breaker_fallback", Answerer::breaker_fallback},
                      StarvationCase{"deny_cache", Answerer::deny_cache},
                      StarvationCase{"in_process", Answerer::in_process}),
    starvation_name);

/// try_acquire_all() over a per-key and a global limiter, asked as a Limiter's try_acquire().
struct ClaimsAsker {
  Limiter& per_key;
  Limiter& global;
  Task<Decision> try_acquire(std::string key) {
    std::vector<Claim> claims{{&per_key, std::move(key)}, {&global, "all"}};
    return try_acquire_all(std::move(claims));
  }
};

using ClaimsInProcess = test::LoopTest;

TEST_F(ClaimsInProcess, ATimerFiresOnTimeWhileCallersLoopOnTryAcquireAll) {
  Limiter per_key(loop(), Policy{Limit::fixed_window("5/min")}, {.name = "starve"});
  Limiter global(loop(), Policy{Limit::fixed_window("5/min")}, {.name = "global"});
  ClaimsAsker asker{per_key, global};
  const test::LatenessProbe probe;
  Starvation seen;
  run(loop(), timer_among_loopers(loop(), asker, &seen));
  ASSERT_TRUE(seen.timer_fired_after.has_value());
  EXPECT_LT(*seen.timer_fired_after, timer_bound + probe.slack());
}

class LoopOnAnotherThread : public test::LoopTest {};

// The loop's thread is not the one that built the limiter: the callers must still yield.
TEST_F(LoopOnAnotherThread, AnInProcessLimiterBuiltOnTheMainThreadYieldsToTheLoopsTimers) {
  Limiter limiter(loop(), Policy{Limit::fixed_window("5/min")}, {.name = "starve"});
  const test::LatenessProbe probe;
  Starvation seen;
  std::thread runner([&] {
    run(loop(), answered_locally(limiter, Answerer::deny_cache));
    run(loop(), timer_among_loopers(loop(), limiter, &seen));
  });
  runner.join();
  ASSERT_TRUE(seen.timer_fired_after.has_value());
  std::printf(
      "[ in_process, other thread ] a %lld ms timer fired after %lld ms, among %lld calls\n",
      milliseconds(timer_delay), milliseconds(*seen.timer_fired_after), seen.calls);
  EXPECT_LT(*seen.timer_fired_after, timer_bound + probe.slack());
}

class SemaphoreCallers : public test::LoopTest {};

TEST_F(SemaphoreCallers, ATimerFiresOnTimeWhileCallersLoopOnAnOpenBreaker) {
  Client client(loop(), {.url = "redis://127.0.0.1:" + std::to_string(test::free_port()),
                         .logger = quiet_logger()});
  Semaphore semaphore(client, 1, SemaphoreOptions{.name = "starve"});
  const test::LatenessProbe probe;
  Starvation seen;
  run(loop(), timer_among_loopers(loop(), semaphore, &seen));
  ASSERT_TRUE(seen.timer_fired_after.has_value());
  std::printf("[ semaphore        ] a %lld ms timer fired after %lld ms, among %lld calls\n",
              milliseconds(timer_delay), milliseconds(*seen.timer_fired_after), seen.calls);
  EXPECT_LT(*seen.timer_fired_after, timer_bound + probe.slack());
  run(loop(), client.close());
}

// ---- a reply that arrived in time

constexpr auto short_timeout = 50ms;
constexpr auto blocked_for = 200ms;

struct Blocker {
  Clock::time_point sent{};
  test::RedisServer* server = nullptr;
  bool done = false;
};

/// Once the command's deadline has nearly come, lets Redis answer and keeps the loop busy past
/// the deadline: the reply waits in the socket while the deadline passes. A check handle runs
/// after the loop polled, so the next thing the loop does is run its timers.
void block_after_poll(uv_check_t* check) {
  auto* blocker = static_cast<Blocker*>(check->data);
  if (blocker->done || Clock::now() < blocker->sent + short_timeout / 2) return;
  blocker->done = true;
  uv_check_stop(check);
  blocker->server->resume();
  const auto until = Clock::now() + blocked_for;
  while (Clock::now() < until) {
  }
}

Task<std::string> ping_while_blocked(Client& client, uv_check_t* check, Blocker* blocker) {
  co_await client.command("PING");  // connected
  blocker->server->pause();
  blocker->sent = Clock::now();
  uv_check_start(check, &block_after_poll);
  const Reply reply = co_await client.command("PING");
  co_return reply.str;
}

Task<void> ping_into(Client& client, std::string* out) {
  const Reply reply = co_await client.command("PING");
  *out = reply.str;
}

/// ping_while_blocked(), with close() begun while the PING waits for its reply.
Task<std::string> ping_while_closing_and_blocked(Client& client, uv_check_t* check,
                                                 Blocker* blocker) {
  co_await client.command("PING");  // connected
  blocker->server->pause();
  blocker->sent = Clock::now();
  uv_check_start(check, &block_after_poll);
  std::string reply;
  TaskGroup group;
  group.add(ping_into(client, &reply));
  co_await client.close();
  co_await group.join();
  co_return reply;
}

class ReplyInTime : public test::LoopTest {
 protected:
  test::RedisServer server_;
};

TEST_F(ReplyInTime, AReplyInTheSocketWhenTheDeadlinePassedCompletesTheCommand) {
  Client client(loop(), {.url = server_.url(), .command_timeout = short_timeout});
  Blocker blocker{.server = &server_};
  uv_check_t check;
  uv_check_init(loop(), &check);
  check.data = &blocker;
  std::string reply;
  EXPECT_NO_THROW(reply = run(loop(), ping_while_blocked(client, &check, &blocker)));
  EXPECT_TRUE(blocker.done);
  EXPECT_EQ(reply, "PONG");
  uv_close(reinterpret_cast<uv_handle_t*>(&check), nullptr);
  run(loop(), client.close());
}

TEST_F(ReplyInTime, AReplyInTheSocketWhenTheDeadlinePassedCompletesTheCommandWhileTheClientCloses) {
  // Why no stats: their last counts would be sent first, and the close would begin after.
  Client client(loop(),
                {.url = server_.url(), .command_timeout = short_timeout, .stats_interval = 0ms});
  Blocker blocker{.server = &server_};
  uv_check_t check;
  uv_check_init(loop(), &check);
  check.data = &blocker;
  std::string reply;
  EXPECT_NO_THROW(reply = run(loop(), ping_while_closing_and_blocked(client, &check, &blocker)));
  EXPECT_TRUE(blocker.done);
  EXPECT_EQ(reply, "PONG");
  uv_close(reinterpret_cast<uv_handle_t*>(&check), nullptr);
  uv_run(loop(), UV_RUN_DEFAULT);
}

}  // namespace
}  // namespace redlimit
