// try_acquire_all() on a Redis Cluster with claims in different hash slots: each slot's claims
// are one script call, and when a later slot denies, the slots that took give back what their
// take still holds. It may under-admit while a take is held, never over-admit.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "limiter/key_format.hpp"
#include "redis/key_slot.hpp"
#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/task_group.hpp"
#include "support/loop_test.hpp"
#include "support/redis_cluster.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

class ClaimsCluster : public test::LoopTest {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    LoopTest::TearDown();
  }
  Client& client() { return client_; }

  test::RedisCluster cluster_{3, 0};

 private:
  Client client_{loop(), ClientOptions{.url = cluster_.url()}};
};

/// A fixed window of `permits` a minute, anchored at its first request, so that a test never
/// crosses a window's end.
Limit minute_window(std::int64_t permits) {
  Limit limit = Limit::fixed_window({permits, 60s});
  limit.window = Window::anchored;
  return limit;
}

/// The hash slot of `key` under a limiter named `name` (the default prefix).
std::uint16_t slot_of(const std::string& name, const std::string& key) {
  return detail::key_slot(detail::key_base("rl", detail::escape_key_part(name), key).view());
}

/// Users whose per-user keys are in another slot than the global key's.
std::vector<std::string> users_apart_from_global(int count) {
  std::vector<std::string> users;
  for (int i = 0; static_cast<int>(users.size()) < count; ++i) {
    const std::string user = "user-" + std::to_string(i);
    if (slot_of("per-user", user) != slot_of("global", "all")) users.push_back(user);
  }
  return users;
}

TEST_F(ClaimsCluster, AGlobalDenialInAnotherSlotGivesTheUsersPermitBack) {
  Limiter per_user(client(), Policy::of(minute_window(100)), {.name = "per-user"});
  Limiter global(client(), Policy::of(minute_window(3)), {.name = "global"});
  const std::vector<std::string> users = users_apart_from_global(2);
  ASSERT_NE(slot_of("per-user", users[0]), slot_of("global", "all"));
  for (int i = 0; i < 3; ++i) {
    std::vector<Claim> claims{{&per_user, users[0]}, {&global, "all"}};
    const Decision allowed = run(loop(), try_acquire_all(std::move(claims)));
    EXPECT_TRUE(allowed.allowed);
    EXPECT_EQ(allowed.claim, 1u) << "the global limit has the fewest left";
    EXPECT_EQ(allowed.remaining, 2 - i);
  }
  for (int i = 0; i < 5; ++i) {
    // The user's slot is asked first and takes; the global slot denies; the take goes back.
    std::vector<Claim> claims{{&per_user, users[1]}, {&global, "all"}};
    const Decision denied = run(loop(), try_acquire_all(std::move(claims)));
    EXPECT_FALSE(denied.allowed);
    EXPECT_EQ(denied.claim, 1u);
    EXPECT_GT(denied.retry_after, 0us);
  }
  EXPECT_EQ(run(loop(), per_user.peek(users[1])).remaining, 100) << "every take was given back";
  EXPECT_EQ(run(loop(), per_user.peek(users[0])).remaining, 97);
  std::vector<Claim> claims{{&per_user, users[1]}, {&global, "all"}};
  const Decision peeked = run(loop(), peek_all(std::move(claims)));
  EXPECT_FALSE(peeked.allowed);
  EXPECT_EQ(peeked.claim, 1u);
}

TEST_F(ClaimsCluster, ABucketsGiveBackIsNeverMoreThanExact) {
  // One permit of a gcra limit is 600 ms; the give-back comes a round trip later, so it
  // returns the permit less that time: the user sees 99 of 100 at first (under-admission
  // while the take was held), and never more than 100.
  Limiter per_user(client(), Policy::of(Limit::gcra({100, 60s})), {.name = "per-user"});
  Limiter global(client(), Policy::of(minute_window(1)), {.name = "global"});
  const std::string user = users_apart_from_global(1).front();
  std::vector<Claim> first{{&global, "all"}};
  EXPECT_TRUE(run(loop(), try_acquire_all(std::move(first))).allowed);
  std::vector<Claim> claims{{&per_user, user}, {&global, "all"}};
  EXPECT_FALSE(run(loop(), try_acquire_all(std::move(claims))).allowed);
  const std::int64_t remaining = run(loop(), per_user.peek(user)).remaining;
  EXPECT_GE(remaining, 99);
  EXPECT_LE(remaining, 100);
}

TEST_F(ClaimsCluster, ConcurrentDecisionsAcrossSlotsNeitherOverAdmitNorLosePermits) {
  // 4 users of 30 per minute each and a global 50 per minute, 240 concurrent requests: the
  // global limit admits exactly 50, each user's count in Redis equals its admissions (a take
  // the global limit denied went back whole: fixed windows give back exactly).
  Limiter per_user(client(), Policy::of(minute_window(30)), {.name = "per-user"});
  Limiter global(client(), Policy::of(minute_window(50)), {.name = "global"});
  const std::vector<std::string> users = users_apart_from_global(4);
  std::map<std::string, int> admitted;
  run(loop(), [&]() -> Task<void> {
    TaskGroup group;
    for (int i = 0; i < 240; ++i) {
      group.add([](Limiter* per_user, Limiter* global, std::string user,
                   std::map<std::string, int>* admitted) -> Task<void> {
        std::vector<Claim> claims{{per_user, user}, {global, "all"}};
        const Decision decision = co_await try_acquire_all(std::move(claims));
        if (decision.allowed) ++(*admitted)[user];
      }(&per_user, &global, users[static_cast<std::size_t>(i) % users.size()], &admitted));
    }
    co_await group.join();
  }());
  int total = 0;
  for (const std::string& user : users) {
    total += admitted[user];
    EXPECT_LE(admitted[user], 30) << user;
    EXPECT_EQ(run(loop(), per_user.peek(user)).remaining, 30 - admitted[user])
        << user << ": its count in Redis is its admissions";
  }
  EXPECT_EQ(total, 50) << "the global limit admits exactly its 50";
  EXPECT_EQ(run(loop(), global.peek("all")).remaining, 0);
}

}  // namespace
}  // namespace redlimit
