// Giving back a take (Adjustment::give_back: what try_acquire_all gives back when another hash
// slot denies, and acquire_all when a part it reserved moved), in Redis and in process, with
// injected times. A take gives back what it still holds (n x T less the time since), but only
// while nothing was scheduled after it: a request reserved behind it keeps its slot (no
// cancellation moves it), so the key must not give those permits to another request on top of it.
#include <gtest/gtest.h>

#include <optional>

#include "limiter/local_backend.hpp"
#include "limiter/redis_backend.hpp"
#include "redlimit/client.hpp"
#include "redlimit/runtime.hpp"
#include "support/decision_checker.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit::detail {
namespace {

using namespace std::chrono_literals;

constexpr std::int64_t t0 = 1'800'000'000'000'000;
constexpr std::int64_t ms = 1'000;

/// One limit of each reservable algorithm: 10 a second, so that a permit is 100 ms; the leaky
/// bucket queues three, so that two requests may queue behind the take.
const Limit limits[] = {Limit::gcra({10, 1s}, 1), Limit::token_bucket({10, 1s}, 1),
                        Limit::leaky_bucket({10, 1s}, 3)};

/// What followed a take at t0 given back at t0 + 2 ms: the reservation made behind the take at
/// t0 + 1 ms (when asked for), and the one made at t0 + 3 ms.
struct AroundAGiveBack {
  std::optional<Reservation> behind;
  Reservation after;
};

Task<AroundAGiveBack> around_a_give_back(Backend& backend, const Limit& limit, std::string key,
                                         bool reserve_behind) {
  const auto policy = CompiledPolicy::compile(Policy::of(limit));
  const auto request = [&](std::int64_t now) {
    return DecideRequest(policy, KeyBase(key), Operation::acquire, 1, now);
  };
  AroundAGiveBack out;
  const Decision take = co_await backend.decide(request(t0));
  EXPECT_TRUE(take.allowed);
  if (reserve_behind) {
    out.behind = co_await backend.reserve(request(t0 + 1 * ms), 10'000'000);
    EXPECT_TRUE(out.behind->decision.allowed);
  }
  co_await backend.adjust(request(t0 + 2 * ms), Adjustment::give_back, 1, t0);
  out.after = co_await backend.reserve(request(t0 + 3 * ms), 10'000'000);
  EXPECT_TRUE(out.after.decision.allowed);
  co_return out;
}

class GiveBack : public test::LoopTest {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    LoopTest::TearDown();
  }
  test::RedisServer server_;
  Client client_{loop(), ClientOptions{.url = server_.url()}};
};

TEST_F(GiveBack, ATakeWithARequestReservedBehindItGivesNothingBack) {
  RedisBackend redis(client_.dispatcher());
  LocalBackend local;
  for (const Limit& limit : limits) {
    const std::string name(to_string(limit.algorithm));
    for (Backend* backend : {static_cast<Backend*>(&redis), static_cast<Backend*>(&local)}) {
      const AroundAGiveBack around =
          run(loop(), around_a_give_back(*backend, limit, "rl:{give-back-" + name + "}", true));
      ASSERT_TRUE(around.behind);
      const test::CheckResult check = test::check_admits(
          limit, {{around.behind->slot.ceil_us(), 1}, {around.after.slot.ceil_us(), 1}});
      EXPECT_TRUE(check) << name << (backend == &redis ? " in Redis: " : " in process: ")
                         << check.description;
    }
  }
}

TEST_F(GiveBack, ATakeWithNothingScheduledAfterItGivesBackWhatItStillHolds) {
  // 98 ms of the take's 100 are given back: the next request passes at once, where it would
  // have waited 97 ms.
  RedisBackend redis(client_.dispatcher());
  LocalBackend local;
  for (const Limit& limit : limits) {
    const std::string name(to_string(limit.algorithm));
    for (Backend* backend : {static_cast<Backend*>(&redis), static_cast<Backend*>(&local)}) {
      const AroundAGiveBack around =
          run(loop(), around_a_give_back(*backend, limit, "rl:{given-back-" + name + "}", false));
      EXPECT_EQ(around.after.wait_us, 0)
          << name << (backend == &redis ? " in Redis" : " in process");
    }
  }
}

/// What a take at t0 sees admitted after a reset at t0 + 1 ms: a take at t0 + 2 ms, then the
/// give-back of the t0 take at t0 + 3 ms, then a take at t0 + 5 ms. (Had the t0 take been made
/// after the reset, its give-back would free all but 3 ms of it, and the take 3 ms later pass.)
Task<std::vector<test::Admit>> admits_after_a_reset(Backend& backend, const Limit& limit,
                                                    std::string key) {
  const auto policy = CompiledPolicy::compile(Policy::of(limit));
  const auto request = [&](std::int64_t now) {
    return DecideRequest(policy, KeyBase(key), Operation::acquire, 1, now);
  };
  const Decision before = co_await backend.decide(request(t0));
  EXPECT_TRUE(before.allowed);
  co_await backend.reset(policy, key, t0 + 1 * ms);
  std::vector<test::Admit> admits;
  if ((co_await backend.decide(request(t0 + 2 * ms))).allowed) admits.push_back({t0 + 2 * ms, 1});
  co_await backend.adjust(request(t0 + 3 * ms), Adjustment::give_back, 1, t0);
  if ((co_await backend.decide(request(t0 + 5 * ms))).allowed) admits.push_back({t0 + 5 * ms, 1});
  co_return admits;
}

TEST_F(GiveBack, ATakeMadeBeforeAResetGivesNothingBackToTheTakesAfterIt) {
  // The reset already gave back everything the key held; the take's give-back, arriving later,
  // must not free the permit a take after the reset holds.
  const Limit every_algorithm[] = {Limit::gcra({1, 1s}, 1),
                                   Limit::token_bucket({1, 1s}, 1),
                                   Limit::leaky_bucket({1, 1s}, 1),
                                   Limit::fixed_window({1, 1s}),
                                   Limit::sliding_window_log({1, 1s}),
                                   Limit::sliding_window_counter({1, 1s})};
  RedisBackend redis(client_.dispatcher());
  LocalBackend local;
  for (const Limit& limit : every_algorithm) {
    const std::string name(to_string(limit.algorithm));
    for (Backend* backend : {static_cast<Backend*>(&redis), static_cast<Backend*>(&local)}) {
      const std::vector<test::Admit> admits = run(
          loop(), admits_after_a_reset(*backend, limit, "rl:{reset-then-give-back-" + name + "}"));
      ASSERT_FALSE(admits.empty()) << name << ": the take after the reset was denied";
      const test::CheckResult check = test::check_admits(limit, admits);
      EXPECT_TRUE(check) << name << (backend == &redis ? " in Redis: " : " in process: ")
                         << check.description;
    }
  }
}

}  // namespace
}  // namespace redlimit::detail
