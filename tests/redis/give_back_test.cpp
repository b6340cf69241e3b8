// Giving back a take (Adjustment::give_back: what try_acquire_all gives back when another hash
// slot denies, and acquire_all when a part it reserved moved), in Redis and in process, with
// injected times. A take gives back what it still holds (n x T less the time since), but only
// while nothing was scheduled after it: a request reserved behind it keeps its slot (no
// cancellation moves it), so the key must not give those permits to another request on top of it.
#include <gtest/gtest.h>

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

/// A take at t0, a reservation behind it at t0 + 1 ms, the take given back at t0 + 2 ms, and
/// another reservation at t0 + 3 ms: the two reserved slots, as admitted.
Task<std::vector<test::Admit>> reserved_around_a_give_back(Backend& backend, const Limit& limit,
                                                           std::string key) {
  const auto policy = CompiledPolicy::compile(Policy::of(limit));
  const auto request = [&](std::int64_t now) {
    return DecideRequest(policy, KeyBase(key), Operation::acquire, 1, now);
  };
  const Decision take = co_await backend.decide(request(t0));
  EXPECT_TRUE(take.allowed);
  const Reservation behind = co_await backend.reserve(request(t0 + 1 * ms), 10'000'000);
  EXPECT_TRUE(behind.decision.allowed);
  co_await backend.adjust(request(t0 + 2 * ms), Adjustment::give_back, 1, t0);
  const Reservation after = co_await backend.reserve(request(t0 + 3 * ms), 10'000'000);
  EXPECT_TRUE(after.decision.allowed);
  co_return std::vector<test::Admit>{{behind.slot.ceil_us(), 1}, {after.slot.ceil_us(), 1}};
}

/// A take at t0 given back at t0 + 2 ms, then a reservation at t0 + 3 ms: its wait.
Task<std::int64_t> wait_after_a_give_back(Backend& backend, const Limit& limit, std::string key) {
  const auto policy = CompiledPolicy::compile(Policy::of(limit));
  const auto request = [&](std::int64_t now) {
    return DecideRequest(policy, KeyBase(key), Operation::acquire, 1, now);
  };
  const Decision take = co_await backend.decide(request(t0));
  EXPECT_TRUE(take.allowed);
  co_await backend.adjust(request(t0 + 2 * ms), Adjustment::give_back, 1, t0);
  const Reservation after = co_await backend.reserve(request(t0 + 3 * ms), 10'000'000);
  EXPECT_TRUE(after.decision.allowed);
  co_return after.wait_us;
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
      const std::vector<test::Admit> admits =
          run(loop(), reserved_around_a_give_back(*backend, limit, "rl:{give-back-" + name + "}"));
      const test::CheckResult check = test::check_admits(limit, admits);
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
      const std::int64_t wait =
          run(loop(), wait_after_a_give_back(*backend, limit, "rl:{given-back-" + name + "}"));
      EXPECT_EQ(wait, 0) << name << (backend == &redis ? " in Redis" : " in process");
    }
  }
}

}  // namespace
}  // namespace redlimit::detail
