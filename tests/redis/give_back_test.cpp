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

}  // namespace
}  // namespace redlimit::detail
