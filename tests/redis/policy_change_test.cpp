// Changing a bucket policy (gcra, leaky_bucket, token_bucket) with set_policy(): the bugs of
// issue 14 and the carries, each against Redis and in process (the same rules in both).
#include <gtest/gtest.h>

#include <memory>

#include "redlimit/client.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/runtime.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"
#include "support/started_task.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

/// A limiter on a private redis-server (parameter true) or in process (false).
class PolicyChange : public test::LoopTest, public ::testing::WithParamInterface<bool> {
 protected:
  void TearDown() override {
    limiter_.reset();
    run(loop(), client_.close());
    EXPECT_TRUE(server_.keys_without_ttl().empty()) << "a key without TTL was left";
    LoopTest::TearDown();
  }
  Limiter& limiter(Limit limit) {
    limiter_ = GetParam() ? std::make_unique<Limiter>(client_, Policy::of(limit),
                                                      LimiterOptions{.name = "change"})
                          : std::make_unique<Limiter>(loop(), Policy::of(limit),
                                                      LimiterOptions{.name = "change"});
    return *limiter_;
  }
  /// How many of `tries` single permits pass on key "k" now.
  int admitted(int tries) {
    int count = 0;
    for (int i = 0; i < tries; ++i)
      count += run(loop(), limiter_->try_acquire("k")).allowed ? 1 : 0;
    return count;
  }

  test::RedisServer server_;

 private:
  Client client_{loop(), ClientOptions{.url = server_.url()}};
  std::unique_ptr<Limiter> limiter_;
};

std::string where(const ::testing::TestParamInfo<bool>& info) {
  return info.param ? "Redis" : "InProcess";
}

INSTANTIATE_TEST_SUITE_P(Backends, PolicyChange, ::testing::Bool(), where);

// Bug 2: the stored time kept its length in time, so a bucket exhausted at 100/min looked
// almost empty at 100/h (98 of 100 passed).
TEST_P(PolicyChange, TighteningGcraKeepsTheBacklogInPermits) {
  Limiter& l = limiter(Limit::gcra("100/min"));
  EXPECT_TRUE(run(loop(), l.try_acquire("k", 100)).allowed);
  l.set_policy(Policy{Limit::gcra("100/h")});
  EXPECT_LE(admitted(100), 1) << "an exhausted bucket stays exhausted (a permit may have refilled)";
}

TEST_P(PolicyChange, TighteningALeakyBucketKeepsItsQueueInPermits) {
  Limiter& l = limiter(Limit::leaky_bucket("100/min"));
  EXPECT_TRUE(run(loop(), l.try_acquire("k")).allowed);  // leaves now, the next leaves in 600 ms
  l.set_policy(Policy{Limit::leaky_bucket("100/h")});
  EXPECT_EQ(admitted(1), 0);  // a denial carries the key over (and its expiry with it)
  run(loop(), sleep_for(loop(), 700ms));
  EXPECT_EQ(admitted(1), 0) << "one permit queued is 36 s at the new rate, not 600 ms";
}

// Bug 1: denials never refreshed the key's TTL, set by the last admission under the old
// policy: the key expired about a second later and the whole limit came back.
TEST_P(PolicyChange, TighteningATokenBucketOutlivesTheOldTtl) {
  Limiter& l = limiter(Limit::token_bucket("10/s"));
  EXPECT_TRUE(run(loop(), l.try_acquire("k", 10)).allowed);
  l.set_policy(Policy{Limit::token_bucket("10/h")});
  EXPECT_EQ(admitted(1), 0);
  run(loop(), sleep_for(loop(), 2200ms));
  EXPECT_LE(admitted(10), 1) << "the empty bucket refills at 10/h, not by expiring";
}

// Bug 4: a refund after set_policy() was refilled at the old rate: cancelled 500 ms after the
// change, the debt had shrunk by 500 permits at 1000/s, and those came back too.
TEST_P(PolicyChange, ARefundAfterTighteningIsCountedUnderTheNewPolicy) {
  Limiter& l = limiter(Limit::token_bucket("1000/s"));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(run(loop(), l.try_acquire("k", 1000)).allowed);
  std::chrono::steady_clock::duration before_change{};
  {
    test::StartedTask waiting =
        test::start([](Limiter& lim) -> Task<void> { co_await lim.acquire("k", 1000); }(l));
    run(loop(), sleep_for(loop(), 20ms));  // reserved: the bucket owes 1000 permits
    before_change = std::chrono::steady_clock::now() - start;
    l.set_policy(Policy{Limit::token_bucket("1000/h")});
    run(loop(), sleep_for(loop(), 480ms));
    EXPECT_FALSE(waiting.done());
  }
  run(loop(), sleep_for(loop(), 50ms));  // the spawned give-back runs
  // What refilled at 1000/s before the change (1 per ms), and a little at 1000/h since.
  const auto refilled = std::chrono::duration_cast<std::chrono::milliseconds>(before_change);
  EXPECT_LE(admitted(1000), refilled.count() + 2)
      << "the refund comes back in the new policy's terms; the old rate ended at the change";
}

}  // namespace
}  // namespace redlimit
