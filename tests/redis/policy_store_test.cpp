#include "redlimit/policy_store.hpp"

#include <gtest/gtest.h>

#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

/// A policy store on a private redis-server.
class PolicyStoreTest : public test::LoopTest {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    LoopTest::TearDown();
  }
  Client& client() { return client_; }

  test::RedisServer server_;

 private:
  Client client_{loop(), ClientOptions{.url = server_.url()}};
};

TEST_F(PolicyStoreTest, TrySetStoresOnlyWhenNothingIsStored) {
  PolicyStore store(client());
  EXPECT_TRUE(run(loop(), store.try_set("sms", Policy::parse("gcra 10/s"))));
  EXPECT_FALSE(run(loop(), store.try_set("sms", Policy::parse("gcra 99/s"))));
  EXPECT_EQ(run(loop(), store.get("sms")), Policy::parse("gcra 10/s"));
}

TEST_F(PolicyStoreTest, SetReplacesAndEveryChangeHasALargerVersion) {
  PolicyStore store(client());
  run(loop(), store.set("sms", Policy::parse("gcra 10/s")));
  const std::optional<PolicyRecord> first = run(loop(), store.record("sms"));
  ASSERT_TRUE(first);
  run(loop(), store.set("sms", Policy::parse("token_bucket 5/min burst 7"), Carry::proportional));
  const std::optional<PolicyRecord> second = run(loop(), store.record("sms"));
  ASSERT_TRUE(second);
  EXPECT_EQ(second->policy, Policy::parse("token_bucket 5/min burst 7"));
  EXPECT_EQ(second->carry, Carry::proportional);
  EXPECT_GT(second->version, first->version);
  EXPECT_GE(second->since_us, first->since_us);
  EXPECT_GT(first->since_us, 0);
}

TEST_F(PolicyStoreTest, GetOfANameWithNothingStoredIsEmpty) {
  PolicyStore store(client());
  EXPECT_EQ(run(loop(), store.get("nothing")), std::nullopt);
  EXPECT_EQ(run(loop(), store.record("nothing")), std::nullopt);
}

TEST_F(PolicyStoreTest, RemoveKeepsTheVersionSoALaterPolicyGetsALargerOne) {
  PolicyStore store(client());
  run(loop(), store.set("sms", Policy::parse("gcra 10/s")));
  run(loop(), store.set_override("sms", "vip", Policy::parse("gcra 100/s")));
  const std::int64_t before = run(loop(), store.record("sms"))->version;
  run(loop(), store.remove("sms"));
  EXPECT_EQ(run(loop(), store.get("sms")), std::nullopt);
  EXPECT_TRUE(run(loop(), store.read("sms")).overrides.empty());
  EXPECT_TRUE(run(loop(), store.try_set("sms", Policy::parse("gcra 1/s"))));
  EXPECT_GT(run(loop(), store.record("sms"))->version, before + 1);
}

TEST_F(PolicyStoreTest, OverridesAreStoredPerKeyAndRemoved) {
  PolicyStore store(client());
  run(loop(), store.set("api", Policy::parse("gcra 10/s")));
  run(loop(), store.set_override("api", "tenant:{gold}", Policy::parse("gcra 1000/s")));
  StoredPolicies stored = run(loop(), store.read("api"));
  ASSERT_EQ(stored.overrides.size(), 1u);
  EXPECT_EQ(stored.overrides.at("tenant:{gold}").policy, Policy::parse("gcra 1000/s"));
  EXPECT_EQ(stored.overrides.at("tenant:{gold}").version, stored.version);
  run(loop(), store.remove_override("api", "tenant:{gold}"));
  EXPECT_TRUE(run(loop(), store.read("api")).overrides.empty());
  EXPECT_EQ(run(loop(), store.get("api")), Policy::parse("gcra 10/s"));
}

TEST_F(PolicyStoreTest, TheScopeIsStoredWithThePolicy) {
  PolicyStore store(client());
  Policy policy = Policy::parse("gcra 10/s");
  policy.scope = Scope::per_client;
  run(loop(), store.set("api", policy));
  EXPECT_EQ(run(loop(), store.get("api")), policy);
}

TEST_F(PolicyStoreTest, AnInvalidPolicyIsRefusedBeforeAnythingIsStored) {
  PolicyStore store(client());
  EXPECT_THROW(run(loop(), store.set("api", Policy::parse("gcra 0/s"))), InvalidArgument);
  EXPECT_THROW(run(loop(), store.set("api", Policy{})), InvalidArgument);
  EXPECT_EQ(run(loop(), store.get("api")), std::nullopt);
}

TEST_F(PolicyStoreTest, NamesAreEscapedSoThatTheyNeverShareARecord) {
  PolicyStore store(client());
  run(loop(), store.set("a}:b", Policy::parse("gcra 1/s")));
  run(loop(), store.set("a", Policy::parse("gcra 2/s")));
  EXPECT_EQ(run(loop(), store.get("a}:b")), Policy::parse("gcra 1/s"));
  EXPECT_EQ(run(loop(), store.get("a")), Policy::parse("gcra 2/s"));
}

}  // namespace
}  // namespace redlimit
