// A follower of a stored policy across a Redis restart that lost its data (no persistence, or a
// failover that lost the last writes): no admission without a stored policy, no key locked by
// a version of the lost lifetime, and policy reads bounded (issue 32, bug 1).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/policy_store.hpp"
#include "redlimit/runtime.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

/// A follower of "api" on a private redis-server that is restarted empty.
class PolicyLostTest : public test::LoopTest {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    LoopTest::TearDown();
  }
  Client& client() { return client_; }

  /// Stores `policy` under "api" three times (versions 1 to 3), so that a follower that heard
  /// them holds version 3.
  void store_three_versions(PolicyStore& store, const std::string& policy) {
    for (int i = 0; i < 3; ++i)
      run(loop(), store.set("api", Policy::parse(policy)));
    ASSERT_EQ(run(loop(), store.record("api"))->version, 3);
  }
  /// Kills the server and starts it again on the same port, empty; returns once `client`
  /// has noticed and connected again.
  void restart_empty(Client& client) {
    server_.kill();
    server_.start();
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < give_up) {
      try {
        run(loop(), client.command({"PING"}));
        return;
      } catch (const Error&) {
        run(loop(), sleep_for(loop(), 5ms));
      }
    }
    FAIL() << "the client did not reconnect within 10 s";
  }
  /// Restarts the server empty, then writes back the state of `key` (one Redis key) as the lost
  /// lifetime left it: as a follower that still held the version it is stamped with would have
  /// written it after the restart.
  void restart_keeping_the_state_of(const std::string& key) {
    std::vector<std::pair<std::string, std::string>> states;
    for (const std::string& name : server_.keys()) {
      if (name.find(":" + key + "}") != std::string::npos)
        states.emplace_back(name, server_.command({"GET", name}).str);
    }
    ASSERT_EQ(states.size(), 1u);
    restart_empty(client());
    for (const auto& [name, value] : states)
      server_.command({"SET", name, value, "PX", "60000"});
  }
  /// Has `limiter` hear versions 1 to 3 of "api" as they are stored.
  void follow_three_versions(PolicyStore& store, Limiter& limiter, const std::string& policy) {
    run(loop(), store.set("api", Policy::parse(policy)));
    ASSERT_EQ(run(loop(), limiter.try_acquire("other")).policy_version, 1);
    run(loop(), store.set("api", Policy::parse(policy)));
    run(loop(), store.set("api", Policy::parse(policy)));
    while (run(loop(), limiter.peek("other")).policy_version != 3)
      run(loop(), sleep_for(loop(), 1ms));
  }
  /// Calls until one is not answered by the failure policy (the client reconnected), at most
  /// 10 s; returns that call's outcome: true for a decision made in Redis that admitted.
  bool first_answer_after_reconnect(Limiter& limiter) {
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < give_up) {
      try {
        const Decision decision = run(loop(), limiter.try_acquire("k"));
        if (decision.source == Source::redis) return decision.allowed;
      } catch (const PolicyNotFound&) {
        return false;
      }
      run(loop(), sleep_for(loop(), 5ms));
    }
    ADD_FAILURE() << "the client did not reconnect within 10 s";
    return false;
  }

  test::RedisServer server_;

 private:
  Client client_{loop(), ClientOptions{.url = server_.url()}};
};

TEST_F(PolicyLostTest, AFollowerAdmitsNothingOnceRedisRestartedWithoutThePolicy) {
  PolicyStore store(client());
  store_three_versions(store, "gcra 100/s");
  Limiter limiter(client(), LimiterOptions{.name = "api", .policy_refresh = 1h});
  const Decision before = run(loop(), limiter.try_acquire("k"));
  ASSERT_TRUE(before.allowed);
  ASSERT_EQ(before.policy_version, 3);

  restart_empty(client());
  EXPECT_FALSE(first_answer_after_reconnect(limiter))
      << "admitted under the cached version 3 although nothing is stored";
  int admitted = 0;
  for (int i = 0; i < 20; ++i) {
    try {
      const Decision decision = run(loop(), limiter.try_acquire("k"));
      if (decision.allowed) ++admitted;
    } catch (const PolicyNotFound&) {
    }
    run(loop(), sleep_for(loop(), 5ms));
  }
  EXPECT_EQ(admitted, 0) << "no policy is stored: no admission";

  run(loop(), store.set("api", Policy::parse("gcra 100/s")));
  const Decision after = run(loop(), limiter.try_acquire("k"));
  EXPECT_TRUE(after.allowed);
  EXPECT_EQ(after.policy_version, 1) << "the policy stored again, in the new lifetime";
}

TEST_F(PolicyLostTest, AKeyStampedWithALostVersionIsDecidedAtOnceWhenThePolicyIsStoredAgain) {
  PolicyStore store(client());
  store_three_versions(store, "gcra 10/min");
  Limiter limiter(client(), LimiterOptions{.name = "api"});
  ASSERT_EQ(run(loop(), limiter.try_acquire("k", 4)).policy_version, 3);
  restart_keeping_the_state_of("k");
  run(loop(), store.set("api", Policy::parse("gcra 10/min")));

  // A process started after the restart: it never saw version 3.
  Client fresh(loop(), ClientOptions{.url = server_.url()});
  Limiter follower(fresh, LimiterOptions{.name = "api"});
  const auto started = std::chrono::steady_clock::now();
  Decision decision;
  EXPECT_NO_THROW(decision = run(loop(), follower.try_acquire("k")));
  std::printf("decided in %.1f ms\n",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
                  .count());
  EXPECT_TRUE(decision.allowed);
  EXPECT_GT(decision.policy_version, 3) << "the store's versions start above the lost ones";
  EXPECT_EQ(decision.remaining, 5) << "the state is kept: 4 taken before, 1 now";
  // And the follower that held version 3 decides too.
  const Decision old_follower = run(loop(), limiter.try_acquire("k"));
  EXPECT_TRUE(old_follower.allowed);
  EXPECT_EQ(old_follower.policy_version, decision.policy_version);
  run(loop(), fresh.close());
}

// Found in review (not named by an issue): as above, with other keys' overrides stored since,
// so that the name's version is past the key's lost one while the key's own is not. The store
// advanced, but the follower took the read it had (as new as the version it asked for) for the
// advanced one, and the call failed with a ConfigError.
TEST_F(PolicyLostTest, AKeyStampedWithALostVersionIsDecidedWhenOtherKeysChangedSinceTheLoss) {
  PolicyStore store(client());
  store_three_versions(store, "gcra 10/min");
  Limiter limiter(client(), LimiterOptions{.name = "api"});
  ASSERT_EQ(run(loop(), limiter.try_acquire("k", 4)).policy_version, 3);
  restart_keeping_the_state_of("k");
  run(loop(), store.set("api", Policy::parse("gcra 10/min")));
  for (const char* other : {"a", "b", "c"})
    run(loop(), store.set_override("api", other, Policy::parse("gcra 20/min")));
  ASSERT_EQ(run(loop(), store.read("api")).version, 4) << "past the key's lost version 3";

  Client fresh(loop(), ClientOptions{.url = server_.url()});
  Limiter follower(fresh, LimiterOptions{.name = "api"});
  Decision decision;
  EXPECT_NO_THROW(decision = run(loop(), follower.try_acquire("k")));
  EXPECT_TRUE(decision.allowed);
  EXPECT_GT(decision.policy_version, 4);
  EXPECT_EQ(decision.remaining, 5) << "the state is kept: 4 taken before, 1 now";
  run(loop(), fresh.close());
}

TEST_F(PolicyLostTest, AFollowerAdmitsNothingOnceItsConnectionIsBackOnAServerThatLostThePolicy) {
  PolicyStore store(client());
  store_three_versions(store, "gcra 100/s");
  Limiter limiter(client(), LimiterOptions{.name = "api", .policy_refresh = 1h});
  ASSERT_TRUE(run(loop(), limiter.try_acquire("k")).allowed);
  // The data is lost and the limiter's connection ends (as in a failover to a replica that
  // had not received the policy); the pub/sub connection stays, so no notice or
  // resubscription tells the follower.
  server_.command({"FLUSHALL"});
  server_.command({"CLIENT", "KILL", "TYPE", "normal"});
  EXPECT_FALSE(first_answer_after_reconnect(limiter))
      << "admitted under the cached version 3 although nothing is stored";
}

// Found in review (not named by an issue): after a restart that lost the store, a new policy may
// be stored under the very version a follower holds; the follower read it, but took it for the
// one it had, and its remembered denials of the old policy went on answering for the new one.
TEST_F(PolicyLostTest, APolicyStoredAgainUnderTheVersionAFollowerHoldsIsANewPolicyToIt) {
  PolicyStore store(client());
  run(loop(), store.set("api", Policy::parse("fixed_window 1/h")));
  Limiter limiter(client(), LimiterOptions{.name = "api", .policy_refresh = 1h});
  ASSERT_TRUE(run(loop(), limiter.try_acquire("k")).allowed);
  const Decision denied = run(loop(), limiter.try_acquire("k"));
  ASSERT_FALSE(denied.allowed);
  ASSERT_EQ(denied.policy_version, 1);

  // As a failover to a replica that had nothing: the data is lost, the connections end.
  server_.command({"FLUSHALL"});
  server_.command({"CLIENT", "KILL", "TYPE", "normal"});
  for (bool connected = false; !connected;) {
    try {
      run(loop(), client().command({"PING"}));  // its connection ended with the others
      connected = true;
    } catch (const ConnectionError&) {
    }
  }
  run(loop(), store.set("api", Policy::parse("fixed_window 100/s")));
  ASSERT_EQ(run(loop(), store.record("api"))->version, 1) << "the version it held";
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  Decision after;
  while (std::chrono::steady_clock::now() < give_up) {
    after = run(loop(), limiter.try_acquire("k"));
    if (after.allowed || limiter.policy() == Policy::parse("fixed_window 100/s")) break;
    run(loop(), sleep_for(loop(), 5ms));
  }
  EXPECT_EQ(limiter.policy(), Policy::parse("fixed_window 100/s")) << "not read again";
  after = run(loop(), limiter.try_acquire("k"));
  EXPECT_TRUE(after.allowed);
  EXPECT_EQ(after.source, Source::redis) << "denied by what the old policy's denial left";
}

TEST_F(PolicyLostTest, PolicyReadsStayBoundedWhenTheStoreIsBehindTheVersionsANoticeNamed) {
  PolicyStore store(client());
  Limiter limiter(client(), LimiterOptions{.name = "api"});
  follow_three_versions(store, limiter, "gcra 100/s");

  restart_empty(client());
  first_answer_after_reconnect(limiter);
  run(loop(), store.set("api", Policy::parse("gcra 100/s")));
  server_.command({"CONFIG", "RESETSTAT"});
  // Ten calls over about half a second, the loop running between them.
  for (int i = 0; i < 10; ++i) {
    try {
      run(loop(), limiter.try_acquire("k"));
    } catch (const PolicyNotFound&) {
    }
    run(loop(), sleep_for(loop(), 50ms));
  }
  const long long scripts = server_.script_calls();
  std::printf("%lld script calls for 10 decisions\n", scripts);
  EXPECT_LE(scripts, 30) << "a policy read storm";
}

}  // namespace
}  // namespace redlimit
