#include <gtest/gtest.h>

#include <algorithm>
#include <stop_token>
#include <thread>

#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/metrics.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/task_group.hpp"
#include "support/lateness_probe.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"
#include "support/started_task.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using test::deadline_slack;
using Clock = std::chrono::steady_clock;

/// acquire() tests, each on a private redis-server and, for comparison, in process.
class AcquireTest : public test::LoopTest, public ::testing::WithParamInterface<bool> {
 protected:
  void TearDown() override {
    limiter_.reset();
    run(loop(), client_.close());
    EXPECT_TRUE(server_.keys_without_ttl().empty());
    LoopTest::TearDown();
  }
  /// A limiter of `limit` on Redis or in process (GetParam()), counting into `metrics` (null:
  /// its client's).
  Limiter& limiter(Limit limit, std::shared_ptr<Metrics> metrics = nullptr) {
    const LimiterOptions options{.name = "acquire", .metrics = std::move(metrics)};
    limiter_ = GetParam() ? std::make_unique<Limiter>(client_, Policy::of(limit), options)
                          : std::make_unique<Limiter>(loop(), Policy::of(limit), options);
    return *limiter_;
  }
  /// Checks, for each bucket algorithm, that a waiter woken late (waiter_woken_late()) is
  /// admitted at its slot and takes no other permit.
  void expect_a_late_waiter_uses_its_slot(bool cancel_behind);

  test::RedisServer server_;
  Client client_{
      loop(), ClientOptions{.url = server_.url(), .command_timeout = 2s, .reservation_lease = 6s}};
  std::unique_ptr<Limiter> limiter_;
  /// The timing checks' slack: what this machine's load cost while the test ran.
  test::LatenessProbe probe_{server_.port()};
};

/// Waiters under owner leases while Redis stops answering: none may end later than its wake
/// plus one command_timeout, whatever renewal was in flight at the wake (renewals, a claim and
/// the circuit breaker together).
class WaitingThroughAPause : public test::LoopTest {
 protected:
  test::RedisServer server_;
  /// The timing checks' slack; its PINGs stop before the server is stopped on purpose.
  test::LatenessProbe probe_{server_.port()};
};

constexpr auto pause_command_timeout = 250ms;
constexpr int paused_waiters = 48;
constexpr auto paused_slot = 31250us;  // Limit::gcra("32/s", 1)
constexpr auto pause_after = 300ms;    // after the first renewals, before the later wakes

struct Ended {
  int index;
  Clock::time_point at;
};

Task<void> wait_and_record(Limiter& limiter, int index, std::vector<Ended>* ended) {
  try {
    const Decision decision = co_await limiter.acquire("k", 1, {});
    static_cast<void>(decision);
  } catch (const Error&) {
    // Redis could not be asked: the failure policy's answer; only the time matters here.
  }
  ended->push_back({index, Clock::now()});
}

Task<void> pause_redis_after(uv_loop_t* loop, test::RedisServer& server, Clock::duration after,
                             test::LatenessProbe& probe) {
  co_await sleep_for(loop, std::chrono::ceil<std::chrono::microseconds>(after));
  probe.stop_pinging();
  server.pause();  // SIGSTOP
}

Task<void> waiters_through_a_pause(uv_loop_t* loop, Limiter& limiter, test::RedisServer& server,
                                   test::LatenessProbe& probe, Clock::time_point* started,
                                   std::vector<Ended>* ended) {
  TaskGroup group;
  *started = Clock::now();
  for (int i = 0; i < paused_waiters; ++i)
    group.add(wait_and_record(limiter, i, ended));
  group.add(pause_redis_after(loop, server, pause_after, probe));
  co_await group.join();
}

// Why waiter i wakes at i slots: the waiters start in one loop turn and reserve in that order,
// also when the turn outlasts LoopTurn's budget (under ASan, one waiter used to lose its place and
// seemed to end 450 ms late).
TEST_F(WaitingThroughAPause, NoWaiterEndsLaterThanItsWakePlusOneCommandTimeout) {
  Client client(loop(), {.url = server_.url(),
                         .command_timeout = pause_command_timeout,
                         .reservation_lease = 3 * pause_command_timeout});
  Limiter limiter(client, Policy::of(Limit::gcra("32/s", 1)), {.name = "paused"});
  Clock::time_point started;
  std::vector<Ended> ended;
  run(loop(), waiters_through_a_pause(loop(), limiter, server_, probe_, &started, &ended));
  server_.resume();
  ASSERT_EQ(ended.size(), static_cast<std::size_t>(paused_waiters));
  Clock::duration latest{};
  for (const Ended& end : ended) {
    const auto wake = started + end.index * paused_slot;
    latest = std::max(latest, end.at - wake);
    EXPECT_LT(end.at - wake, pause_command_timeout + probe_.slack()) << "waiter " << end.index;
  }
  std::printf("latest end after its wake: %lld ms\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(latest).count()));
  run(loop(), client.close());
}

Task<void> one_waiter_paused_before_its_wake(uv_loop_t* loop, Limiter& limiter,
                                             test::RedisServer& server, test::LatenessProbe& probe,
                                             Clock::time_point* wake, Clock::time_point* ended) {
  const Decision first = co_await limiter.try_acquire("k", 1);
  EXPECT_TRUE(first.allowed);
  *wake = Clock::now() + 1s;
  TaskGroup group;
  // Renewals go every 100 ms (a third of the lease); from 650 ms on, the one at ~700 ms gets
  // no answer, and the circuit breaker stays closed for the next two calls.
  group.add(pause_redis_after(loop, server, 650ms, probe));
  try {
    static_cast<void>(co_await limiter.acquire("k", 1, {}));
  } catch (const Error&) {
    // The failure policy's answer: only the time matters here.
  }
  *ended = Clock::now();
  co_await group.join();
}

// Why: a renewal sent shortly before the wake, with no answer, used to hold the waiter for its
// whole command_timeout, and the claim after it for one more.
TEST_F(WaitingThroughAPause, ARenewalInFlightAtTheWakeDoesNotDelayTheEnd) {
  const auto lease = 300ms;
  Client client(
      loop(),
      {.url = server_.url(), .command_timeout = pause_command_timeout, .reservation_lease = lease});
  Limiter limiter(client, Policy::of(Limit::gcra("1/s", 1)), {.name = "paused"});
  Clock::time_point wake;
  Clock::time_point ended;
  run(loop(), one_waiter_paused_before_its_wake(loop(), limiter, server_, probe_, &wake, &ended));
  server_.resume();
  EXPECT_LT(ended - wake, pause_command_timeout + probe_.slack());
  std::printf("ended after its wake: %lld ms\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(ended - wake).count()));
  run(loop(), client.close());
}

struct Finished {
  int index;
  Decision decision;
  Clock::time_point at;
};

Task<void> acquire_into(Limiter& limiter, int index, std::stop_token stop,
                        std::vector<Finished>* finished, int* cancelled) {
  try {
    Decision d = co_await limiter.acquire("k", 1, {.stop = stop});
    finished->push_back({index, d, Clock::now()});
  } catch (const Cancelled&) {
    ++*cancelled;
  }
}

Task<void> queue_of(Limiter& limiter, int count, std::vector<Finished>* finished) {
  TaskGroup group;
  int cancelled = 0;
  for (int i = 0; i < count; ++i)
    group.add(acquire_into(limiter, i, {}, finished, &cancelled));
  co_await group.join();
}

TEST_P(AcquireTest, WaitersSleepExactlyTheirReservedTimeInReservationOrder) {
  Limiter& l = limiter({Algorithm::gcra, {20, 1s}, 1, Window::aligned});
  std::vector<Finished> finished;
  const auto start = Clock::now();
  run(loop(), queue_of(l, 8, &finished));
  ASSERT_EQ(finished.size(), 8u);
  for (std::size_t i = 0; i < finished.size(); ++i) {
    const Finished& f = finished[i];
    EXPECT_TRUE(f.decision.allowed);
    EXPECT_EQ(f.index, static_cast<int>(i)) << "served in reservation order";
    // Slots count from the first reservation; each waiter's own wait from its own start.
    const auto expected = std::chrono::microseconds(50'000 * f.index);
    EXPECT_GE(f.at - start, expected - 1ms);
    EXPECT_LT(f.decision.waited, expected + probe_.slack());
  }
  if (GetParam()) {
    // The slots, in server time, are exactly 50 ms apart.
    for (std::size_t i = 1; i < finished.size(); ++i) {
      EXPECT_EQ(finished[i].decision.server_time_us - finished[i - 1].decision.server_time_us,
                50'000);
    }
  }
}

Task<void> acquire_with(Limiter& limiter, std::chrono::microseconds max_wait, Decision* decision) {
  *decision = co_await limiter.acquire("k", 1, {.max_wait = max_wait});
}

Task<void> beyond_max_wait(Limiter& limiter, Decision* last_ok, Decision* refused, Decision* next) {
  const std::chrono::microseconds short_wait = 120ms;
  TaskGroup queue;
  for (int i = 0; i < 3; ++i)
    queue.add(acquire_with(limiter, short_wait, last_ok));  // 0-100 ms
  co_await acquire_with(limiter, short_wait, refused);      // would wait 150 ms
  co_await acquire_with(limiter, 0us, next);
  co_await queue.join();
}

TEST_P(AcquireTest, AWaitBeyondMaxWaitIsADenialThatReservesNothing) {
  Limiter& l = limiter({Algorithm::gcra, {20, 1s}, 1, Window::aligned});
  Decision last_ok, refused, next;
  const auto start = Clock::now();
  run(loop(), beyond_max_wait(l, &last_ok, &refused, &next));
  EXPECT_TRUE(last_ok.allowed);
  EXPECT_FALSE(refused.allowed);
  // The slack: the refused request reaches Redis a little after the first reservation (more on
  // a busy machine), and its would-be wait is that much shorter than 150 ms.
  EXPECT_LT(refused.waited, probe_.slack()) << "a refused acquire does not wait";
  EXPECT_GE(refused.retry_after, 150ms - deadline_slack)
      << "retry_after is the wait it would have had";
  EXPECT_LE(refused.retry_after, 150ms);
  EXPECT_FALSE(next.allowed);
  EXPECT_LT(Clock::now() - start, 100ms + probe_.slack());
}

/// Sets `outcome` to "waiting" while acquire() waits, then to "granted", "denied" or
/// "cancelled".
Task<void> acquire_until_stopped(Limiter& limiter, std::stop_token stop, std::string* outcome) {
  *outcome = "waiting";
  try {
    const Decision decision = co_await limiter.acquire("k", 1, {.stop = stop});
    *outcome = decision.allowed ? "granted" : "denied";
  } catch (const Cancelled&) {
    *outcome = "cancelled";
  }
}

/// acquire() calls of `metrics`' limiters that wait for their permits.
std::int64_t waiters(const Metrics& metrics) {
  std::int64_t out = 0;
  for (const LimiterStats& stats : metrics.snapshot().limiters)
    out += stats.waiters;
  return out;
}

/// Takes the key's first permit and reserves the next (due 100 ms on); with `cancel_behind`,
/// reserves one more behind it and cancels that (the key's log of cancellations then matters
/// until 300 ms on, the key's state until 200 ms on). Then keeps the loop's thread busy for
/// 400 ms: the waiter wakes at least 300 ms after its slot, past the time its key's state (and
/// log) stopped mattering; then a try_acquire.
Task<void> waiter_woken_late(uv_loop_t* loop, Limiter& limiter, const Metrics& metrics,
                             bool cancel_behind, Decision* first, Decision* late, Decision* after) {
  *first = co_await limiter.try_acquire("k");
  TaskGroup waiting;
  waiting.add(acquire_with(limiter, 10s, late));
  while (waiters(metrics) == 0)
    co_await sleep_for(loop, 1ms);
  std::stop_source stop;
  std::string behind = "none";
  if (cancel_behind) {
    waiting.add(acquire_until_stopped(limiter, stop.get_token(), &behind));
    while (waiters(metrics) < 2)
      co_await sleep_for(loop, 1ms);
    stop.request_stop();
    while (behind == "waiting")
      co_await sleep_for(loop, 1ms);
    EXPECT_EQ(behind, "cancelled");
  }
  std::this_thread::sleep_for(400ms);
  co_await waiting.join();
  *after = co_await limiter.try_acquire("k");
}

void AcquireTest::expect_a_late_waiter_uses_its_slot(bool cancel_behind) {
  // The leaky bucket's queue holds the first permit and the waiters (burst 1 queues nothing).
  const std::int64_t leaky_burst = cancel_behind ? 3 : 2;
  for (const Limit& limit :
       {Limit{Algorithm::gcra, {10, 1s}, 1, Window::aligned},
        Limit{Algorithm::token_bucket, {10, 1s}, 1, Window::aligned},
        Limit{Algorithm::leaky_bucket, {10, 1s}, leaky_burst, Window::aligned}}) {
    SCOPED_TRACE(to_string(limit.algorithm));
    const auto metrics = std::make_shared<Metrics>();
    Limiter& l = limiter(limit, metrics);
    Decision first, late, after;
    run(loop(), waiter_woken_late(loop(), l, *metrics, cancel_behind, &first, &late, &after));
    ASSERT_TRUE(first.allowed);
    EXPECT_TRUE(late.allowed);
    EXPECT_TRUE(after.allowed) << "the late waiter took a second permit: it reserved again";
    if (GetParam()) {
      EXPECT_EQ(late.server_time_us - first.server_time_us, 100'000)
          << "admitted at its slot, where Redis charged its permit";
    }
    run(loop(), l.reset("k"));
  }
}

TEST_P(AcquireTest, AWaiterWokenLateUsesItsSlotAndTakesNothingMore) {
  expect_a_late_waiter_uses_its_slot(false);
}

TEST_P(AcquireTest, AWaiterWokenLateAfterACancellationBehindItUsesItsSlot) {
  // Its reservation was made before the cancellation: Redis finds where it stands from the log.
  expect_a_late_waiter_uses_its_slot(true);
}

/// Starts an acquire() with the default max_wait, peeks at the key while it waits, cancels it
/// and peeks again.
Task<void> wait_then_cancel(uv_loop_t* loop, Limiter& limiter, std::string* outcome, bool* waiting,
                            Decision* while_waiting, Decision* after_cancel) {
  std::stop_source stop;
  TaskGroup group;
  group.add(acquire_until_stopped(limiter, stop.get_token(), outcome));
  co_await sleep_for(loop, 50ms);
  *waiting = *outcome == "waiting";
  *while_waiting = co_await limiter.peek("k");
  stop.request_stop();
  co_await group.join();
  *after_cancel = co_await limiter.peek("k");
}

TEST_P(AcquireTest, TheDefaultMaxWaitWaitsAsLongAsItTakesEvenAMonth) {
  constexpr std::chrono::microseconds day = 24h;
  Limiter& l = limiter({Algorithm::gcra, {1, 30 * day}, 1, Window::aligned});
  ASSERT_TRUE(run(loop(), l.try_acquire("k")).allowed);
  std::string outcome;
  bool waiting = false;
  Decision while_waiting, after_cancel;
  run(loop(), wait_then_cancel(loop(), l, &outcome, &waiting, &while_waiting, &after_cancel));
  EXPECT_TRUE(waiting) << "a 30-day wait is waited for, not " << outcome;
  EXPECT_EQ(outcome, "cancelled");
  EXPECT_GT(while_waiting.reset_after, 59 * day) << "it reserved the slot 30 days ahead";
  EXPECT_LE(after_cancel.reset_after, 30 * day) << "the cancelled reservation was given back";
}

Task<void> cancel_every_other(uv_loop_t* loop, Limiter& limiter, std::vector<Finished>* finished,
                              int* cancelled) {
  std::vector<std::stop_source> stops(10);
  TaskGroup group;
  for (int i = 0; i < 10; ++i) {
    group.add(acquire_into(limiter, i, stops[static_cast<std::size_t>(i)].get_token(), finished,
                           cancelled));
  }
  co_await sleep_for(loop, 30ms);
  for (int i = 1; i < 10; i += 2)
    stops[static_cast<std::size_t>(i)].request_stop();
  co_await group.join();
}

/// The slots of the cancellation tests: 5/s. Why so far apart: every odd waiter is stopped
/// 30 ms in, before the first of them is due (one interval in); at 50 ms apart a busy machine
/// fired that stop after it, and waiter 1 was admitted.
constexpr std::int64_t cancel_interval_us = 200'000;
const Limit cancel_limit{Algorithm::gcra, {5, 1s}, 1, Window::aligned};

/// Whether a waiter on "k" hears a cancellation ahead of it: admitted at the cancelled one's
/// slot (one interval after the permit taken first), not behind it.
Task<bool> notice_heard(uv_loop_t* loop, Limiter& limiter, bool in_redis) {
  const Decision taken = co_await limiter.try_acquire("k");
  std::vector<Finished> finished;
  int cancelled = 0;
  std::stop_source stop_first;
  TaskGroup group;
  group.add(acquire_into(limiter, 0, stop_first.get_token(), &finished, &cancelled));
  group.add(acquire_into(limiter, 1, {}, &finished, &cancelled));
  co_await sleep_for(loop, 10ms);
  stop_first.request_stop();
  co_await group.join();
  // The key idle again: one interval after the last slot.
  co_await sleep_for(loop, std::chrono::microseconds(cancel_interval_us) + 50ms);
  if (!in_redis) co_return true;  // in process, notices are delivered at once
  co_return taken.allowed&& finished.size() == 1 &&
      finished.front().decision.server_time_us == taken.server_time_us + cancel_interval_us;
}

TEST_P(AcquireTest, CancelledWaitersGiveTheirPermitsToThoseBehindThem) {
  Limiter& l = limiter(cancel_limit);
  // Why first: a notice published before the key's subscription is confirmed is lost, and a
  // waiter that may have missed one takes a new place at the back (exact, docs/waiting.md);
  // on a loaded machine the subscription can take longer than the 30 ms this test allows.
  bool heard = false;
  for (int attempt = 0; attempt < 20 && !heard; ++attempt)
    heard = run(loop(), notice_heard(loop(), l, GetParam()));
  ASSERT_TRUE(heard) << "no cancellation notice was heard in 20 attempts";
  std::vector<Finished> finished;
  int cancelled = 0;
  const auto start = Clock::now();
  run(loop(), cancel_every_other(loop(), l, &finished, &cancelled));
  EXPECT_EQ(cancelled, 5);
  ASSERT_EQ(finished.size(), 5u);
  for (std::size_t k = 0; k < finished.size(); ++k) {
    // Waiter 2k had 2k slots ahead of it, k of which were cancelled: it waits k intervals.
    EXPECT_EQ(finished[k].index, static_cast<int>(2 * k));
    const auto expected = std::chrono::microseconds(cancel_interval_us * static_cast<int>(k));
    EXPECT_GE(finished[k].at - start, expected - 1ms) << "waiter " << finished[k].index;
    EXPECT_LT(finished[k].at - start, expected + probe_.slack()) << "waiter " << finished[k].index;
  }
  if (GetParam()) {
    for (std::size_t k = 1; k < finished.size(); ++k) {
      EXPECT_EQ(finished[k].decision.server_time_us - finished[k - 1].decision.server_time_us,
                cancel_interval_us);
    }
  }
  EXPECT_LT(Clock::now() - start,
            std::chrono::microseconds(4 * cancel_interval_us) + 50ms + probe_.slack());
}

Task<Decision> acquire_one(Limiter& limiter) {
  co_return co_await limiter.acquire("k");
}

TEST_P(AcquireTest, DestroyingAWaitingTaskGivesItsReservationBack) {
  Limiter& l = limiter({Algorithm::gcra, {10, 1s}, 1, Window::aligned});
  EXPECT_TRUE(run(loop(), l.try_acquire("k")).allowed);
  {
    test::StartedTask waiting =
        test::start([](Limiter& lim) -> Task<void> { co_await lim.acquire("k"); }(l));
    run(loop(), sleep_for(loop(), 20ms));  // it has reserved the slot at 100 ms
    EXPECT_FALSE(waiting.done());
  }
  run(loop(), sleep_for(loop(), 20ms));  // the spawned give-back runs
  const auto start = Clock::now();
  const Decision d = run(loop(), acquire_one(l));
  EXPECT_TRUE(d.allowed);
  EXPECT_LT(Clock::now() - start, 70ms + probe_.slack()) << "the abandoned slot was given back";
}

Task<void> window_queue(Limiter& limiter, std::vector<Finished>* finished) {
  TaskGroup group;
  int cancelled = 0;
  for (int i = 0; i < 3; ++i)
    group.add(acquire_into(limiter, i, {}, finished, &cancelled));
  co_await group.join();
}

TEST_P(AcquireTest, WindowAlgorithmsAskAgainAtRetryAfter) {
  Limiter& l = limiter({Algorithm::sliding_window_log, {2, 200ms}, 0, Window::aligned});
  std::vector<Finished> finished;
  const auto start = Clock::now();
  run(loop(), window_queue(l, &finished));
  ASSERT_EQ(finished.size(), 3u);
  std::sort(finished.begin(), finished.end(),
            [](const Finished& a, const Finished& b) { return a.at < b.at; });
  EXPECT_LT(finished[1].at - start, probe_.slack());
  EXPECT_GE(finished[2].at - start, 199ms);
  EXPECT_LT(finished[2].at - start, 200ms + probe_.slack());
}

TEST_P(AcquireTest, AlreadyStoppedOrBadOptionsFailBeforeAnyWork) {
  Limiter& l = limiter({Algorithm::gcra, {10, 1s}, 1, Window::aligned});
  std::stop_source stopped;
  stopped.request_stop();
  EXPECT_THROW(run(loop(), l.acquire("k", 1, {.stop = stopped.get_token()})), Cancelled);
  EXPECT_THROW(run(loop(), l.acquire("k", 1, {.max_wait = -1us})), InvalidArgument);
  EXPECT_THROW(run(loop(), l.acquire("k", 2)), InvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Backends, AcquireTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Redis" : "Local"; });

}  // namespace
}  // namespace redlimit
