// The deny cache under a 10x overload on one key: it answers most denials without a round trip,
// never admits more than Redis (the checker on every admit), and never denies what Redis would
// admit (every cached denial ends no later than Redis's own retry_after at that moment).
#include <gtest/gtest.h>

#include <thread>

#include "redlimit/client.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/task_group.hpp"
#include "support/decision_checker.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int coroutines = 64;
constexpr auto duration = 2s;

struct Tally {
  std::vector<test::Admit> admits;
  int denied_by_redis = 0;
  int denied_by_cache = 0;
  int cache_too_long = 0;  ///< cached denials that would outlast Redis's own
};

Task<void> client_loop(uv_loop_t* loop, Limiter& limiter, Limiter& truth, Clock::time_point end,
                       std::chrono::microseconds turn, Tally* run) {
  while (Clock::now() < end) {
    const auto started = Clock::now();
    const Decision d = co_await limiter.try_acquire("hot");
    if (d.allowed) {
      run->admits.push_back({d.server_time_us, 1});
    } else if (d.source == Source::deny_cache) {
      ++run->denied_by_cache;
      // Why `started`: the cache answered at or after it, so this is at most the cached end;
      // a clock read after the call would add any time the process was descheduled since.
      const auto cached_until = started + d.retry_after;
      const Decision redis = co_await truth.peek("hot");
      const auto redis_until = Clock::now() + (redis.allowed ? 0us : redis.retry_after);
      if (cached_until > redis_until) ++run->cache_too_long;
    } else {
      ++run->denied_by_redis;
    }
    const auto next = started + turn;
    if (next > Clock::now()) {
      co_await sleep_for(
          loop, std::chrono::duration_cast<std::chrono::microseconds>(next - Clock::now()));
    }
  }
}

Task<void> overload(uv_loop_t* loop, Limiter& limiter, Limiter& truth, double limit_per_second,
                    Tally* run) {
  // 10x the limit in all: each coroutine asks once per turn.
  const auto turn = std::chrono::microseconds(
      static_cast<std::int64_t>(coroutines * 1e6 / (10 * limit_per_second)));
  const auto end = Clock::now() + duration;
  TaskGroup group;
  for (int i = 0; i < coroutines; ++i)
    group.add(client_loop(loop, limiter, truth, end, turn, run));
  co_await group.join();
}

struct CacheCase {
  const char* name;
  Policy policy;
  double limit_per_second;
};

Task<void> both_at_once(Task<void> first, Task<void> second) {
  TaskGroup group;
  group.add(std::move(first));
  group.add(std::move(second));
  co_await group.join();
}

/// Sleeps until the Redis clock is half way through a second.
// Why: both runs then start and end half way through a 1 s window, when a 10x overload has long
// filled it; a run ending just after a window opened would compare how fast each side was in
// the few milliseconds left, which on a busy machine says nothing about the cache.
void start_half_way_through_a_second(const test::RedisServer& server) {
  const Reply time = server.command({"TIME"});
  const std::int64_t into_second_us = std::stoll(time.as_array()[1].as_string());
  std::this_thread::sleep_for(std::chrono::microseconds((1'500'000 - into_second_us) % 1'000'000));
}

class DenyCache : public test::LoopTest, public ::testing::WithParamInterface<CacheCase> {
 protected:
  test::RedisServer server_;
};

TEST_P(DenyCache, SavesRoundTripsUnderOverloadWithoutChangingWhatIsAdmitted) {
  // The same overload on two keys at the same time (same windows, same machine load): one
  // limiter with the cache, one without.
  // Why max_batch 1: every call is then one EVALSHA, so the server's count of them is the count
  // of round trips (a batch would count as one).
  Client client(loop(), {.url = server_.url(), .max_batch = 1});
  Limiter cached(client, GetParam().policy, {.name = "cached", .deny_cache = true});
  Limiter cached_truth(client, GetParam().policy, {.name = "cached", .deny_cache = false});
  Limiter plain(client, GetParam().policy, {.name = "plain", .deny_cache = false});
  Tally with_cache;
  Tally without_cache;
  const long long before = server_.script_calls();
  start_half_way_through_a_second(server_);
  run(loop(),
      both_at_once(overload(loop(), cached, cached_truth, GetParam().limit_per_second, &with_cache),
                   overload(loop(), plain, plain, GetParam().limit_per_second, &without_cache)));
  run(loop(), client.close());
  // Every request of the plain limiter is a round trip; the rest, minus the checks made for
  // each cached denial, are the cached limiter's.
  const long long all_trips = server_.script_calls() - before;
  const long long without_cache_trips =
      static_cast<long long>(without_cache.admits.size()) + without_cache.denied_by_redis;
  const long long with_cache_trips = all_trips - without_cache_trips - with_cache.denied_by_cache;

  for (const Limit& limit : GetParam().policy.limits) {
    const test::CheckResult check = test::check_admits(limit, with_cache.admits);
    EXPECT_TRUE(check) << check.description;
  }
  EXPECT_EQ(with_cache.cache_too_long, 0) << "a cached denial outlasted Redis's own";
  EXPECT_GT(with_cache.denied_by_cache, 0);
  EXPECT_EQ(without_cache.denied_by_cache, 0);
  // The cache takes nothing from what Redis admits: at least the same share of the load gets
  // through. (More is not over-admission, which check_admits() rules out: on a busy machine the
  // limiter without the cache, a round trip per request, falls behind the load.)
  const double ratio = static_cast<double>(with_cache.admits.size()) /
                       static_cast<double>(without_cache.admits.size());
  EXPECT_GT(ratio, 0.9);
  // How much it saves depends on retry_after: a window's denial lasts until its end, a 100/s
  // gcra denial about 10 ms.
  EXPECT_LT(with_cache_trips, without_cache_trips) << "the cache saves round trips";
  std::printf(
      "[ %-12s ] round trips: %lld without the cache, %lld with it (%.0f%% saved); "
      "%zu vs %zu admitted; %d denials from the cache\n",
      GetParam().name, without_cache_trips, with_cache_trips,
      100.0 *
          (1.0 - static_cast<double>(with_cache_trips) / static_cast<double>(without_cache_trips)),
      with_cache.admits.size(), without_cache.admits.size(), with_cache.denied_by_cache);
  EXPECT_TRUE(server_.keys_without_ttl().empty());
}

Policy two_limits() {
  // Both bind in turn: each window opens with a gcra burst of 20, then 200/s until the window's
  // 100 are used. The window comes first: no key of this policy can hold reservations.
  Policy policy;
  policy.limits.push_back({Algorithm::fixed_window, {100, 1s}});
  policy.limits.push_back({Algorithm::gcra, {200, 1s}, 20});
  return policy;
}

INSTANTIATE_TEST_SUITE_P(
    Policies, DenyCache,
    ::testing::Values(
        CacheCase{"fixed_window", Policy::of({Algorithm::fixed_window, {100, 1s}}), 100},
        CacheCase{"sliding_log", Policy::of({Algorithm::sliding_window_log, {100, 1s}}), 100},
        CacheCase{"two_limits", two_limits(), 100}),
    [](const auto& info) { return std::string(info.param.name); });

Task<void> deny_then_reset(Limiter& limiter, bool* cached_before, bool* allowed_after) {
  // Why not `while ((co_await ...).allowed)`: g++ 12 miscompiles co_await in a loop condition.
  for (;;) {
    const Decision d = co_await limiter.try_acquire("k");
    if (!d.allowed) break;
  }
  *cached_before = (co_await limiter.try_acquire("k")).source == Source::deny_cache;
  co_await limiter.reset("k");
  *allowed_after = (co_await limiter.try_acquire("k")).allowed;
}

TEST(DenyCacheRules, ResetAndSetPolicyClearIt) {
  test::RedisServer server;
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    Client client(&loop, {.url = server.url()});
    Limiter limiter(client, Policy::of({Algorithm::fixed_window, {3, 1h}}), {.name = "r"});
    bool cached_before = false;
    bool allowed_after = false;
    run(&loop, deny_then_reset(limiter, &cached_before, &allowed_after));
    EXPECT_TRUE(cached_before);
    EXPECT_TRUE(allowed_after) << "reset() cleared the cached denial";
    while (run(&loop, limiter.try_acquire("k")).allowed) {
    }
    EXPECT_EQ(run(&loop, limiter.try_acquire("k")).source, Source::deny_cache);
    limiter.set_policy(Policy::of({Algorithm::fixed_window, {10, 1h}}));
    EXPECT_TRUE(run(&loop, limiter.try_acquire("k")).allowed) << "set_policy() cleared it";
    // A single gcra limit can hold reservations, which a cancellation may give back: no cache.
    Limiter gcra(client, Policy::of({Algorithm::gcra, {1, 1h}}), {.name = "g"});
    run(&loop, gcra.try_acquire("k"));
    EXPECT_EQ(run(&loop, gcra.try_acquire("k")).source, Source::redis);
    EXPECT_EQ(run(&loop, gcra.try_acquire("k")).source, Source::redis);
    run(&loop, client.close());
  }
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

/// EVALSHA calls for `calls` try_acquire() on one key of `policy`, once the key is denied.
long long round_trips_on_a_denied_key(test::RedisServer& server, Policy policy, int calls) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  long long trips = 0;
  {
    Client client(&loop, {.url = server.url()});
    Limiter limiter(client, std::move(policy), {.name = "order"});
    while (run(&loop, limiter.try_acquire("hot")).allowed) {
    }
    const long long before = server.script_calls();
    for (int i = 0; i < calls; ++i)
      EXPECT_FALSE(run(&loop, limiter.try_acquire("hot")).allowed);
    trips = server.script_calls() - before;
    run(&loop, limiter.reset("hot"));
    run(&loop, client.close());
  }
  EXPECT_EQ(uv_loop_close(&loop), 0);
  return trips;
}

TEST(DenyCacheRules, ADenialByALimitThatCannotHoldReservationsIsCachedInAnyOrder) {
  // The README's first program: a gcra rate and a daily quota. Once the quota is used, the
  // quota denies until the next window whatever the gcra limit allows: every call is denied
  // without a round trip, whether the quota comes first or second.
  test::RedisServer server;
  const Limit rate{Algorithm::gcra, {10, 1s}};
  const Limit quota{Algorithm::fixed_window, {5, 24h}, 0, Window::anchored};
  const long long quota_first = round_trips_on_a_denied_key(server, Policy{{quota, rate}}, 5000);
  const long long rate_first = round_trips_on_a_denied_key(server, Policy{{rate, quota}}, 5000);
  std::printf("[ EVALSHA    ] 5000 calls on a denied key: %lld (quota first), %lld (rate first)\n",
              quota_first, rate_first);
  EXPECT_LE(quota_first, 1);
  EXPECT_LE(rate_first, 1);
}

TEST(DenyCacheRules, ADenialByAFirstBucketLimitIsNotCached) {
  // The first limit's key is also the key of a single-limit gcra policy of the same name,
  // whose acquire() reservations a cancellation gives back: its denial may end early.
  test::RedisServer server;
  const Limit rate{Algorithm::gcra, {1, 1h}};
  const Limit quota{Algorithm::fixed_window, {100, 24h}, 0, Window::anchored};
  EXPECT_EQ(round_trips_on_a_denied_key(server, Policy{{rate, quota}}, 10), 10);
}

}  // namespace
}  // namespace redlimit
