// try_acquire_all() and acquire_all() on a Redis Cluster with claims in different hash slots:
// each slot's claims are one script call, and when a later slot denies, the slots that took
// give back what their take still holds. It may under-admit while a take is held, never
// over-admit. acquire_all() reserves every slot's claims at one slot, so that it keeps its
// place in each key's queue.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "policy/key_format.hpp"
#include "redis/key_slot.hpp"
#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/task_group.hpp"
#include "support/decision_checker.hpp"
#include "support/loop_test.hpp"
#include "support/redis_cluster.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

class ClaimsCluster : public test::LoopTest {
 protected:
  void SetUp() override { run(loop(), client_.connect()); }
  void TearDown() override {
    run(loop(), client_.close());
    LoopTest::TearDown();
  }
  Client& client() { return client_; }

  test::RedisCluster cluster_{3, 0};

 private:
  // Why connected first, with long timeouts: these tests check what Redis holds after every
  // call was answered. On a busy machine, 240 calls sent while the connections, the slot map
  // and the scripts were still on their way missed the default 250 ms; a call that fails
  // denies, and a take in another slot that cannot be given back stays taken.
  Client client_{
      loop(), ClientOptions{.url = cluster_.url(), .connect_timeout = 5s, .command_timeout = 5s}};
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
  std::map<Source, int> denied_by;
  run(loop(), [&]() -> Task<void> {
    TaskGroup group;
    for (int i = 0; i < 240; ++i) {
      group.add([](Limiter* per_user, Limiter* global, std::string user,
                   std::map<std::string, int>* admitted,
                   std::map<Source, int>* denied_by) -> Task<void> {
        std::vector<Claim> claims{{per_user, user}, {global, "all"}};
        const Decision decision = co_await try_acquire_all(std::move(claims));
        if (decision.allowed) {
          ++(*admitted)[user];
        } else {
          ++(*denied_by)[decision.source];
        }
      }(&per_user, &global, users[static_cast<std::size_t>(i) % users.size()], &admitted,
                                                     &denied_by));
    }
    co_await group.join();
  }());
  std::ostringstream denials;
  for (const auto& [source, count] : denied_by)
    denials << " " << count << " by " << to_string(source);
  SCOPED_TRACE("denials:" + denials.str());
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

/// try_acquire() of one permit of `key`, into `out`.
Task<void> try_acquire_into(Limiter* limiter, std::string key, std::optional<Decision>* out) {
  *out = co_await limiter->try_acquire(std::move(key));
}

/// try_acquire_all() of one permit of each claim, into `out`.
Task<void> try_acquire_all_into(std::vector<Claim> claims, std::optional<Decision>* out) {
  *out = co_await try_acquire_all(std::move(claims));
}

TEST_F(ClaimsCluster, AGiveBackAcrossSlotsClearsTheDenialItsProcessRemembers) {
  // The user's key takes its one permit, a try_acquire() of that key sent right behind the
  // take is denied (and the denial remembered until the window's end), the global key denies,
  // and the take goes back: the user's next try_acquire() must reach Redis, where the permit
  // is free again, not be denied by the remembered denial for the rest of the minute.
  Limiter per_user(client(), Policy::of(minute_window(1)), {.name = "per-user"});
  Limiter global(client(), Policy::of(minute_window(1)), {.name = "global"});
  const std::string user = users_apart_from_global(1).front();
  ASSERT_TRUE(run(loop(), global.try_acquire("all")).allowed);
  std::optional<Decision> all;
  std::optional<Decision> behind;
  run(loop(), [&]() -> Task<void> {
    TaskGroup group;
    group.add(try_acquire_all_into({{&per_user, user}, {&global, "all"}}, &all));
    group.add(try_acquire_into(&per_user, user, &behind));
    co_await group.join();
  }());
  ASSERT_TRUE(all && behind);
  EXPECT_FALSE(all->allowed);
  EXPECT_EQ(all->claim, 1u) << "the global key denied";
  ASSERT_FALSE(behind->allowed) << "not sent behind the take: the scenario did not happen";
  EXPECT_EQ(run(loop(), per_user.peek(user)).remaining, 1) << "the take was given back";
  const Decision after = run(loop(), per_user.try_acquire(user));
  EXPECT_TRUE(after.allowed) << "denied by " << to_string(after.source);
}

/// acquire() of one permit of `key` after `delay`, into `out`. Why functions, not lambdas: a
/// coroutine lambda's captures die with its closure, before the coroutine ends.
Task<void> acquire_after(uv_loop_t* loop, std::chrono::milliseconds delay, Limiter* limiter,
                         std::string key, std::optional<Decision>* out) {
  co_await sleep_for(loop, delay);
  *out = co_await limiter->acquire(std::move(key), 1, {.max_wait = 5s});
}

Task<void> acquire_all_after(uv_loop_t* loop, std::chrono::milliseconds delay,
                             std::vector<Claim> claims, std::optional<Decision>* out) {
  co_await sleep_for(loop, delay);
  *out = co_await acquire_all(std::move(claims), {.max_wait = 5s});
}

TEST_F(ClaimsCluster, AcquireAllAcrossSlotsKeepsItsPlaceInTheQueueOfTheKeyThatBinds) {
  // The user's key could take its permit at once, the global key's (in another slot) only
  // after the first waiter's: both are reserved at the global key's slot, behind the first
  // waiter and ahead of the second, and the user's key is charged once.
  Limiter global(client(), Policy::of(Limit::gcra({10, 1s}, 1)), {.name = "global"});
  Limiter per_user(client(), Policy::of(Limit::gcra({1, 10s}, 3)), {.name = "per-user"});
  const std::string user = users_apart_from_global(1).front();
  // Why first: every node's connection is open and its reserve script loaded before the timed
  // part. It takes the global key's burst and one of the user's three permits.
  std::vector<Claim> warm_up{{&per_user, user}, {&global, "all"}};
  ASSERT_TRUE(run(loop(), acquire_all(std::move(warm_up))).allowed);
  std::optional<Decision> first, claims, second;
  run(loop(), [&]() -> Task<void> {
    TaskGroup group;
    group.add(acquire_after(loop(), 0ms, &global, "all", &first));
    group.add(acquire_all_after(loop(), 10ms, {{&per_user, user}, {&global, "all"}}, &claims));
    group.add(acquire_after(loop(), 80ms, &global, "all", &second));
    co_await group.join();
  }());
  ASSERT_TRUE(first && claims && second);
  ASSERT_TRUE(first->allowed && claims->allowed && second->allowed);
  EXPECT_LT(first->server_time_us, claims->server_time_us);
  EXPECT_LT(claims->server_time_us, second->server_time_us)
      << "the waiter that came after acquire_all went first";
  EXPECT_EQ(claims->claim, 1u) << "the global key bound";
  EXPECT_EQ(run(loop(), per_user.peek(user)).remaining, 1)
      << "the user's key gave acquire_all one permit, not two";
}

/// The Redis time each call of a limiter was told with (DecisionEvent), by key.
struct ToldTimes {
  std::map<std::string, std::int64_t> by_key;
  DecisionListener listener() {
    return [this](const DecisionEvent& event) {
      if (event.decision != nullptr)
        by_key[std::string(event.key)] = event.decision->server_time_us;
    };
  }
};

/// The fields of the value stored for `key`'s first limit of `limiter` (a bucket: its stored
/// time first, the Redis time of the script that wrote it last).
std::vector<std::int64_t> stored_fields(uv_loop_t* loop, Client& client, Limiter& limiter,
                                        const std::string& key) {
  const std::vector<LimitState> states = run(loop, limiter.inspect(key));
  const Reply value = run(loop, client.command("GET", states.front().redis_key));
  std::vector<std::int64_t> fields;
  std::istringstream text(value.as_string());
  for (std::string field; std::getline(text, field, ':');)
    fields.push_back(std::stoll(field));
  return fields;
}

// Issue 33, bug 5: across slots, each slot's claims are one script call at its own Redis time,
// and every claim's limiter was told the binding slot's time: a decision log checked from it
// saw a key charged when it was not. Each claim's limiter is told the time its own key used:
// when its slot's script wrote it, for try_acquire_all and an acquire_all that did not wait
// (two calls, one after the other: two times); where its key was charged, for one that waited.
TEST_F(ClaimsCluster, EachClaimIsToldTheRedisTimeItsOwnKeyUsed) {
  ToldTimes user_times;
  ToldTimes global_times;
  Limiter per_user(client(), Policy::of(Limit::gcra({1, 10s}, 3)),
                   {.name = "per-user", .on_decision = user_times.listener()});
  Limiter global(client(), Policy::of(Limit::gcra({2, 1s}, 2)),
                 {.name = "global", .on_decision = global_times.listener()});
  const std::vector<std::string> users = users_apart_from_global(3);
  // try_acquire_all, then acquire_all with no wait: the global burst of 2.
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(i == 0 ? "try_acquire_all" : "acquire_all, no wait");
    const std::string& user = users[static_cast<std::size_t>(i)];
    std::vector<Claim> claims{{&per_user, user}, {&global, "all"}};
    Decision decision;
    if (i == 0) {
      decision = run(loop(), try_acquire_all(std::move(claims)));
    } else {
      decision = run(loop(), acquire_all(std::move(claims)));
    }
    ASSERT_TRUE(decision.allowed);
    const std::int64_t user_at = stored_fields(loop(), client(), per_user, user).back();
    const std::int64_t global_at = stored_fields(loop(), client(), global, "all").back();
    EXPECT_NE(user_at, global_at) << "two script calls, one after the other";
    EXPECT_EQ(user_times.by_key[user], user_at);
    EXPECT_EQ(global_times.by_key["all"], global_at);
    EXPECT_EQ(decision.server_time_us, decision.claim == 0 ? user_at : global_at)
        << "the caller gets the binding claim's";
  }
  // The global key is busy for 500 ms: acquire_all waits for its slot, and the user's fresh key
  // is charged there (or at its own call's time, if that came later): its TAT less 10 s.
  std::vector<Claim> claims{{&per_user, users[2]}, {&global, "all"}};
  const Decision waited = run(loop(), acquire_all(std::move(claims)));
  ASSERT_TRUE(waited.allowed);
  ASSERT_EQ(waited.claim, 1u) << "the global key set the slot";
  EXPECT_EQ(global_times.by_key["all"], waited.server_time_us);
  EXPECT_EQ(user_times.by_key[users[2]],
            stored_fields(loop(), client(), per_user, users[2]).front() - 10'000'000);
}

/// The admissions a limiter's listener was told of, each at the Redis time its own key used
/// (the caller of acquire_all() gets the binding claim's, which across slots is another
/// script call's, on another node).
struct ToldAdmits {
  std::vector<test::Admit> admits;
  DecisionListener listener() {
    return [this](const DecisionEvent& event) {
      if (event.decision != nullptr && event.decision->allowed)
        admits.push_back({event.decision->server_time_us, event.permits});
    };
  }
};

/// Calls acquire_all() over `user`'s key and the global key (waiting up to `max_wait`), until
/// `until`; a denial waits its retry_after.
Task<void> acquire_all_until(uv_loop_t* loop, Limiter* global, Limiter* per_user, std::string user,
                             std::chrono::steady_clock::time_point until, int* denied,
                             std::chrono::milliseconds max_wait = 300ms) {
  while (std::chrono::steady_clock::now() < until) {
    std::vector<Claim> claims{{per_user, user}, {global, "all"}};
    const Decision decision = co_await acquire_all(std::move(claims), {.max_wait = max_wait});
    if (!decision.allowed) {
      ++*denied;
      co_await sleep_for(loop, decision.retry_after);
    }
  }
}

/// Whether the tests of acquire_all() across slots below check how much of the global limit
/// was used. Not under the sanitizers (-O0), where a call across slots costs several times as
/// much: on a starved machine (a seventh of a core) its round trips before it waits spent much
/// of its max_wait; the overload test admitted 43 to 127 of 160, too few to tell the bug it
/// reproduces apart (50 of 160, optimized, on an idle machine), and the other 40 to 82 (its
/// limit allows 81). The optimized build, at a tenth of a core, admitted 149 to 158 of 160 and
/// 81. Their exactness is checked in both.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool checks_use_of_the_limit = false;
#else
constexpr bool checks_use_of_the_limit = true;
#endif

TEST_F(ClaimsCluster, WaitingInAcquireAllAcrossSlotsNeverExceedsTheGlobalLimit) {
  // 12 coroutines over 4 users, each waiting up to 300 ms for its user's key and the global key
  // (in other hash slots) for 2 s. Every admission of the global key, at the Redis time that
  // key used, is checked against GCRA's exact inequality.
  const Limit global_limit = Limit::gcra({40, 1s}, 1);
  ToldAdmits told;
  Limiter global(client(), Policy::of(global_limit),
                 {.name = "global", .on_decision = told.listener()});
  Limiter per_user(client(), Policy::of(Limit::gcra({20, 1s}, 2)), {.name = "per-user"});
  const std::vector<std::string> users = users_apart_from_global(4);
  const std::vector<test::Admit>& admits = told.admits;
  int denied = 0;
  const auto until = std::chrono::steady_clock::now() + 2s;
  run(loop(), [&]() -> Task<void> {
    TaskGroup group;
    for (std::size_t i = 0; i < 12; ++i)
      group.add(
          acquire_all_until(loop(), &global, &per_user, users[i % users.size()], until, &denied));
    co_await group.join();
  }());
  std::printf("[ across slots ] %zu admitted, %d denied\n", admits.size(), denied);
  const test::CheckResult check = test::check_admits(global_limit, admits);
  EXPECT_TRUE(check) << check.description;
  if (checks_use_of_the_limit) {
    EXPECT_GT(admits.size(), 40u) << "the global limit's 40/s was used";
  }
}

TEST_F(ClaimsCluster, AcquireAllAcrossSlotsStillUsesTheLimitUnderOverload) {
  // Issue 33, bug 2: 32 coroutines over 4 users, each waiting up to 500 ms for its user's key
  // (20/s) and the global key (50/s, in another slot), for 3 s: more demand than max_wait can
  // queue (25 of the global key's permits). The global limit allows 160 in that time (plus what
  // the last waits reach); before, 32 were admitted: a part given back across slots moved the
  // waiters behind it on its key, and each of those found its part moved at its wake, wasted
  // its global permit and reserved again with its max_wait spent. Why 500 ms: a call across
  // slots makes several round trips before it waits; on a busy machine (under the sanitizers,
  // beside three CPU-bound processes) those took most of 200 ms, and only 73 were admitted.
  // Every admission of the global key is logged at the Redis time that key used: the caller's
  // decision carries the binding claim's, often the user's key's, decided on another node.
  const Limit global_limit = Limit::gcra({50, 1s}, 10);
  ToldAdmits told;
  Limiter global(client(), Policy::of(global_limit),
                 {.name = "global", .on_decision = told.listener()});
  Limiter per_user(client(), Policy::of(Limit::gcra({20, 1s}, 5)), {.name = "per-user"});
  const std::vector<std::string> users = users_apart_from_global(4);
  const std::vector<test::Admit>& admits = told.admits;
  int denied = 0;
  const auto until = std::chrono::steady_clock::now() + 3s;
  run(loop(), [&]() -> Task<void> {
    TaskGroup group;
    for (std::size_t i = 0; i < 32; ++i)
      group.add(acquire_all_until(loop(), &global, &per_user, users[i % users.size()], until,
                                  &denied, 500ms));
    co_await group.join();
  }());
  std::printf("[ overload across slots ] %zu admitted (the limit allows 160), %d denied\n",
              admits.size(), denied);
  const test::CheckResult check = test::check_admits(global_limit, admits);
  EXPECT_TRUE(check) << check.description;
  if (checks_use_of_the_limit) {
    EXPECT_GT(admits.size(), 80u) << "less than half the global limit's capacity was used";
  }
}

}  // namespace
}  // namespace redlimit
