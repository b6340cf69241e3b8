// Reservations of a process that died (issue 15, bug 5): a process with 400 waiting acquire()
// calls on one gcra key is killed; its reservations must be given back within 1 s of its death
// (docs/waiting.md, "Reservations of a process that dies"), for the survivors' acquire() and
// try_acquire() alike.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "redlimit/client.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/task_group.hpp"
#include "support/child_process.hpp"
#include "support/decision_checker.hpp"
#include "support/lateness_probe.hpp"
#include "support/loop_test.hpp"
#include "support/redis_cluster.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int dead_waiters = 400;
const Limit limit{Algorithm::gcra, {200, 1s}, 1, Window::aligned};  // a slot every 5 ms
/// The limit's key, as the waiter process names it (limiter "waiting", key "dead").
constexpr std::string_view key = "rl:{waiting:dead}:gcra:0";
/// The bound to check: given back within 1 s of the death (the default lease of 750 ms, renewed
/// every 250 ms), plus the time to the next script call on the key and the scheduling slack of
/// a loaded 2-core machine: 300 ms, or what the run's lateness probe measured if more.
constexpr auto bound = 1s;

std::chrono::microseconds slack(const test::LatenessProbe& probe) {
  return std::max<std::chrono::microseconds>(300ms, probe.slack());
}

std::int64_t unix_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class Reclaim : public test::LoopTest {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    LoopTest::TearDown();
  }

  /// Starts a waiter process with `dead_waiters` acquire() calls on the key, all at once.
  pid_t start_waiter() {
    const char* binary = std::getenv("REDLIMIT_WAITER");
    return test::start_process({binary != nullptr ? binary : "waiter", server_.url(), "dead",
                                std::to_string(limit.rate.permits),
                                std::to_string(limit.rate.period.count()),
                                std::to_string(dead_waiters), std::to_string(unix_us() + 500'000),
                                "60000", "0", "0", server_.dir() + "/dead.txt"});
  }

  test::RedisServer server_;
  // Why 2 s: the waiter processes flood the server at first, and on a busy machine a call then
  // missed the default 250 ms (as on a cluster, below).
  Client client_{loop(), ClientOptions{.url = server_.url(), .command_timeout = 2s}};
  const test::LatenessProbe probe_{server_.port()};
};

/// Waits until the key holds at least `wait` of reservations (its TTL is the time until idle).
Task<bool> reserved_ahead(Client& client, uv_loop_t* loop, std::chrono::milliseconds wait,
                          std::string on = std::string(key)) {
  const auto give_up = Clock::now() + 10s;
  while (Clock::now() < give_up) {
    const Reply ttl = co_await client.command("PTTL", on);
    if (ttl.as_integer() >= wait.count()) co_return true;
    co_await sleep_for(loop, 5ms);
  }
  co_return false;
}

/// try_acquire() every 10 ms until one is allowed; when, or nullopt after 5 s.
Task<void> probe(Limiter& limiter, uv_loop_t* loop, std::optional<Clock::time_point>* allowed_at) {
  const auto give_up = Clock::now() + 5s;
  while (Clock::now() < give_up) {
    const Decision decision = co_await limiter.try_acquire("dead");
    if (decision.allowed) {
      *allowed_at = Clock::now();
      co_return;
    }
    co_await sleep_for(loop, 10ms);
  }
}

/// acquire() after `delay`; how long it waited, or nullopt if it was denied.
Task<void> acquire_later(Limiter& limiter, uv_loop_t* loop, std::chrono::milliseconds delay,
                         std::optional<std::chrono::microseconds>* waited) {
  co_await sleep_for(loop, delay);
  const Decision decision = co_await limiter.acquire("dead", 1, {.max_wait = 5s});
  if (decision.allowed) *waited = decision.waited;
}

/// Reservations ahead that show the waiter process made (nearly) all of its 400: 2 s of slots
/// once they are all made, less the slots that pass while it makes them (a loaded machine may
/// take a few hundred milliseconds). Still more than the bound and its slack, so without a
/// reclaim the checks below fail.
constexpr auto reserved_enough = 1600ms;

/// Kills a waiter process once it reserved its slots; the time of its death.
Clock::time_point kill_waiter(Client& client, uv_loop_t* loop, pid_t pid) {
  const bool reserved = run(loop, reserved_ahead(client, loop, reserved_enough));
  kill(pid, SIGKILL);
  const auto death = Clock::now();
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(reserved) << "the waiter process did not reserve its 400 permits";
  EXPECT_TRUE(WIFSIGNALED(status));
  return death;
}

std::int64_t ms(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

TEST_F(Reclaim, AKilledProcessesReservationsAreGivenBackWithinOneSecondForAWaitingSurvivor) {
  Limiter survivor(client_, Policy::of(limit), {.name = "waiting"});
  const pid_t pid = start_waiter();
  ASSERT_GT(pid, 0);
  kill_waiter(client_, loop(), pid);
  std::optional<std::chrono::microseconds> waited;
  run(loop(), acquire_later(survivor, loop(), 100ms, &waited));
  ASSERT_TRUE(waited.has_value()) << "the survivor's acquire was denied";
  std::printf("[ reclaim ] acquire started %lld ms after the death waited %lld ms\n",
              static_cast<long long>(ms(100ms)), static_cast<long long>(ms(*waited)));
  // Started 100 ms after the death: its wait ends by the bound, not behind the dead backlog.
  EXPECT_LT(*waited, bound - 100ms + slack(probe_))
      << "the survivor's acquire waited " << ms(*waited) << " ms";
}

TEST_F(Reclaim, AKilledProcessesReservationsAreGivenBackWithinOneSecondForTryAcquire) {
  Limiter survivor(client_, Policy::of(limit), {.name = "waiting"});
  const pid_t pid = start_waiter();
  ASSERT_GT(pid, 0);
  const auto death = kill_waiter(client_, loop(), pid);
  std::optional<Clock::time_point> allowed_at;
  run(loop(), probe(survivor, loop(), &allowed_at));
  ASSERT_TRUE(allowed_at.has_value()) << "try_acquire was denied for 5 s after the death";
  std::printf("[ reclaim ] try_acquire allowed again %lld ms after the death\n",
              static_cast<long long>(ms(*allowed_at - death)));
  EXPECT_LT(*allowed_at - death, bound + slack(probe_))
      << "try_acquire was allowed again " << ms(*allowed_at - death) << " ms after the death";
}

/// Ends when `call` does, at `*ended` (never set if it was denied or failed).
Task<void> time_of_admission(Task<Decision> call, std::optional<Clock::time_point>* ended) {
  const Decision decision = co_await std::move(call);
  if (decision.allowed) *ended = Clock::now();
}

/// Kills the waiter processes `after` the survivors' calls began; the time of their death.
Task<Clock::time_point> kill_after(uv_loop_t* loop, std::vector<pid_t> pids,
                                   std::chrono::milliseconds after) {
  co_await sleep_for(loop, after);
  for (const pid_t pid : pids)
    kill(pid, SIGKILL);
  co_return Clock::now();
}

/// Starts a waiter process on `url` per entry of `dead` ("a,b": 600 acquire_all() calls on keys
/// "a" and "b"; "a;b": 600 acquire() calls on each; "a": 600 acquire() calls on "a"), 3 s of
/// slots on each key (more than one reclaim call takes, 256); queues survivors behind them
/// (acquire_all of both keys, and acquire of each), kills the processes and checks that every
/// survivor gets its permits within the bound of the death.
void check_survivors_behind_the_dead(uv_loop_t* loop, Client& client, const std::string& url,
                                     const std::string& dir, const std::vector<std::string>& dead) {
  Limiter survivor(client, Policy::of(limit), {.name = "waiting"});
  const test::LatenessProbe probe;
  const char* binary = std::getenv("REDLIMIT_WAITER");
  std::vector<pid_t> pids;
  for (std::size_t i = 0; i < dead.size(); ++i) {
    pids.push_back(test::start_process({binary != nullptr ? binary : "waiter", url, dead[i],
                                        std::to_string(limit.rate.permits),
                                        std::to_string(limit.rate.period.count()),
                                        dead[i].find(';') != std::string::npos ? "1200" : "600",
                                        std::to_string(unix_us() + 500'000), "60000", "0", "0",
                                        dir + "/dead-" + std::to_string(i) + ".txt"}));
    ASSERT_GT(pids.back(), 0);
  }
  bool reserved = true;
  // Why 2 s of the 3: on a loaded machine the 600 calls take a while to reserve, and the
  // first slots pass meanwhile; 2 s ahead is still twice the bound.
  for (const std::string on : {"rl:{waiting:a}:gcra:0", "rl:{waiting:b}:gcra:0"})
    reserved = reserved && run(loop, reserved_ahead(client, loop, 2s, on));
  std::optional<Clock::time_point> all_ended, a_ended, b_ended;
  std::vector<Claim> both{{&survivor, "a", 1}, {&survivor, "b", 1}};
  TaskGroup group;
  group.add(time_of_admission(acquire_all(std::move(both), {.max_wait = 5s}), &all_ended));
  group.add(time_of_admission(survivor.acquire("a", 1, {.max_wait = 5s}), &a_ended));
  group.add(time_of_admission(survivor.acquire("b", 1, {.max_wait = 5s}), &b_ended));
  Task<Clock::time_point> killing = kill_after(loop, pids, 50ms);
  const auto death = run(loop, [&]() -> Task<Clock::time_point> {
    const auto at = co_await std::move(killing);
    co_await group.join();
    co_return at;
  }());
  for (const pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status));
  }
  ASSERT_TRUE(reserved) << "the waiter processes did not reserve their 600 permits on each key";
  ASSERT_TRUE(all_ended && a_ended && b_ended) << "a survivor was denied";
  std::printf(
      "[ reclaim ] after the death: acquire_all(a, b) %lld ms, acquire(a) %lld ms, "
      "acquire(b) %lld ms\n",
      static_cast<long long>(ms(*all_ended - death)), static_cast<long long>(ms(*a_ended - death)),
      static_cast<long long>(ms(*b_ended - death)));
  EXPECT_LT(*all_ended - death, bound + slack(probe));
  EXPECT_LT(*a_ended - death, bound + slack(probe));
  EXPECT_LT(*b_ended - death, bound + slack(probe));
}

// Issue 33, bug 1: an acquire_all() queued behind a dead process's acquire_all() reservations
// used to wait out the whole dead backlog (it did not hear the reclaim's notices); an outside
// check also saw acquire() on one of its keys recover only partly, so both keys' are checked.
TEST_F(Reclaim, SurvivorsQueuedBehindAKilledProcessesAcquireAllGetTheCapacityBackWithinOneSecond) {
  check_survivors_behind_the_dead(loop(), client_, server_.url(), server_.dir(), {"a,b"});
}

/// The same on a cluster of three primaries, where "a" and "b" are in different slots, behind
/// dead acquire() calls on each key, made by one process in the same loop turns. (Behind dead
/// acquire_all() calls across slots the keys keep the gaps those reservations left (each part
/// reserved at the later key's slot), which a reclaim does not give back: see docs/waiting.md.
/// Why one process: behind queues that end at different times, acquire_all's parts are
/// reserved at the later end, and the earlier key keeps that gap too; two processes, one
/// per key, may start their calls far apart on a busy machine.)
class ReclaimOnACluster : public test::LoopTest {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    LoopTest::TearDown();
  }

  test::RedisCluster cluster_{3, 0};
  // Why 2 s: the waiter process floods the three nodes on this 2-core machine at first.
  Client client_{loop(), ClientOptions{.url = cluster_.url(), .command_timeout = 2s}};
};

TEST_F(ReclaimOnACluster,
       SurvivorsAcquireAllAcrossSlotsGetTheCapacityBackWithinOneSecondOfItsDeath) {
  check_survivors_behind_the_dead(loop(), client_, cluster_.url(), cluster_.node(0).dir(), {"a;b"});
}

/// try_acquire() every 5 ms for `duration`, keeping the server time of each admission.
Task<void> admit_for(Limiter& limiter, uv_loop_t* loop, Clock::duration duration,
                     std::vector<test::Admit>* admits) {
  const auto end = Clock::now() + duration;
  while (Clock::now() < end) {
    const Decision decision = co_await limiter.try_acquire("dead");
    if (decision.allowed) admits->push_back({decision.server_time_us, 1});
    co_await sleep_for(loop, 5ms);
  }
}

// A process paused (SIGSTOP) for longer than its lease has its reservations given back to the
// others; continued, its waiters must not use them: those whose slots passed the last lease
// Redis confirmed claim them and, reclaimed, reserve again. Every admission of both processes
// fits the limit.
TEST_F(Reclaim, APausedProcessNeverUsesReservationsGivenBackWhileItWasStopped) {
  Limiter survivor(client_, Policy::of(limit), {.name = "waiting"});
  const pid_t pid = start_waiter();
  ASSERT_GT(pid, 0);
  const bool reserved = run(loop(), reserved_ahead(client_, loop(), reserved_enough));
  kill(pid, SIGSTOP);
  std::vector<test::Admit> admits;
  run(loop(), admit_for(survivor, loop(), 1500ms, &admits));
  const std::size_t while_stopped = admits.size();
  kill(pid, SIGCONT);
  run(loop(), admit_for(survivor, loop(), 2500ms, &admits));
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(reserved) << "the waiter process did not reserve its 400 permits";
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the waiter process failed";
  EXPECT_GT(while_stopped, 0u) << "nothing was given back while the process was stopped";

  std::ifstream out(server_.dir() + "/dead.txt");
  int allowed = 0;
  for (std::string line; std::getline(out, line);) {
    std::istringstream fields(line);
    std::string outcome;
    std::int64_t server_time_us = 0;
    fields >> outcome >> server_time_us;
    EXPECT_EQ(outcome, "allowed") << line;
    if (outcome != "allowed") continue;
    ++allowed;
    admits.push_back({server_time_us, 1});
  }
  EXPECT_EQ(allowed, dead_waiters);
  std::printf("[ reclaim ] stopped 1.5 s: survivors admitted %zu while stopped, %zu in all\n",
              while_stopped, admits.size() - static_cast<std::size_t>(allowed));
  const test::CheckResult check = test::check_admits(limit, admits);
  EXPECT_TRUE(check.ok) << check.description;
}

}  // namespace
}  // namespace redlimit
