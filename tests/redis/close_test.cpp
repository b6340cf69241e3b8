// Client::close() waits for the library's own background work (lease releases, refunds of
// abandoned reservations) before it closes the connections, and answers the decisions in
// flight.

#include <gtest/gtest.h>

#include "redlimit/client.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/semaphore.hpp"
#include "redlimit/task_group.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"
#include "support/started_task.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

class CloseTest : public test::LoopTest {
 protected:
  void TearDown() override {
    EXPECT_TRUE(server_.keys_without_ttl().empty()) << "a key without TTL was left";
    LoopTest::TearDown();
  }
  ClientOptions options() const {
    return ClientOptions{.url = server_.url(), .command_timeout = 2s, .reservation_lease = 6s};
  }

  test::RedisServer server_;
};

Task<void> drop_lease_then_close(Semaphore& semaphore, Client& client) {
  {
    std::optional<Lease> lease = co_await semaphore.try_acquire("tenant");
    EXPECT_TRUE(lease.has_value());
  }  // its release starts in the background
  co_await client.close();
}

TEST_F(CloseTest, ALeaseDestroyedJustBeforeCloseHasGivenItsPermitBack) {
  Client client(loop(), options());
  Semaphore semaphore(client, 1, "exports", 20s);
  run(loop(), drop_lease_then_close(semaphore, client));
  EXPECT_EQ(server_.integer({"ZCOUNT", "rl:{exports:tenant}:semaphore", "(0", "+inf"}), 0)
      << "the permit stays held for the lease TTL";
}

Task<void> wait_for_two(Limiter& limiter) {
  co_await limiter.acquire("k", 2);
}

TEST_F(CloseTest, AReservationAbandonedJustBeforeCloseHasBeenRefunded) {
  const Policy policy = Policy::of({Algorithm::gcra, {2, 10s}, 2, Window::aligned});
  {
    Client client(loop(), options());
    Limiter limiter(client, policy, LimiterOptions{.name = "refund"});
    EXPECT_TRUE(run(loop(), limiter.try_acquire("k", 1)).allowed);
    {
      test::StartedTask waiting = test::start(wait_for_two(limiter));
      run(loop(), sleep_for(loop(), 20ms));  // it has reserved 2 permits, 5 s ahead
      EXPECT_FALSE(waiting.done());
    }  // its refund starts in the background
    run(loop(), client.close());
  }
  Client reconnected(loop(), options());
  Limiter limiter(reconnected, policy, LimiterOptions{.name = "refund"});
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k", 1)).allowed)
      << "the abandoned reservation still holds the permit";
  run(loop(), reconnected.close());
}

// Issue 33, bug 8: under load the test above failed now and then: the waiting task was destroyed
// before the reservation's reply arrived, and that reservation was never given back. Here the
// reply is held back for sure (Redis stopped while the call is sent).
TEST_F(CloseTest, AReservationAbandonedBeforeItsReplyArrivedIsGivenBackWhenItArrives) {
  const Policy policy = Policy::of({Algorithm::gcra, {2, 10s}, 2, Window::aligned});
  {
    Client client(loop(), options());
    Limiter limiter(client, policy, LimiterOptions{.name = "refund"});
    EXPECT_TRUE(run(loop(), limiter.try_acquire("k", 1)).allowed);
    server_.pause();
    {
      test::StartedTask waiting = test::start(wait_for_two(limiter));
      run(loop(), sleep_for(loop(), 20ms));  // sent; Redis has not run it
      EXPECT_FALSE(waiting.done());
    }  // abandoned before the reply
    server_.resume();
    run(loop(), client.close());
  }
  Client reconnected(loop(), options());
  Limiter limiter(reconnected, policy, LimiterOptions{.name = "refund"});
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k", 1)).allowed)
      << "the reservation abandoned before its reply still holds the permits";
  run(loop(), reconnected.close());
}

Task<void> acquire_one(Semaphore& semaphore) {
  static_cast<void>(co_await semaphore.acquire("tenant"));
}

Task<void> try_acquire_one(Semaphore& semaphore) {
  static_cast<void>(co_await semaphore.try_acquire("tenant"));
}

// Found in review (not named by an issue): a semaphore's grant whose caller was destroyed before
// its reply arrived held its permit for the whole lease TTL, with no lease to release it.
TEST_F(CloseTest, ASemaphoreGrantAbandonedBeforeItsReplyArrivedIsReleasedWhenItArrives) {
  for (auto* call : {&acquire_one, &try_acquire_one}) {
    {
      Client client(loop(), options());
      Semaphore semaphore(client, 1, "exports", 20s);
      run(loop(), semaphore.try_acquire("other"));  // connected, its scripts loaded
      server_.pause();
      {
        test::StartedTask granting = test::start(call(semaphore));
        run(loop(), sleep_for(loop(), 20ms));  // sent; Redis has not run it
        EXPECT_FALSE(granting.done());
      }  // abandoned before the reply
      server_.resume();
      run(loop(), client.close());
    }
    EXPECT_EQ(server_.integer({"ZCOUNT", "rl:{exports:tenant}:semaphore", "(0", "+inf"}), 0)
        << "the grant abandoned before its reply holds the permit for the lease TTL";
  }
}

Task<void> decide_into(Limiter& limiter, Decision* out) {
  *out = co_await limiter.try_acquire("k");
}

// Why it matters: after a restart or a SCRIPT FLUSH, the decision's EVALSHA meets NOSCRIPT, and
// the reload that completes it goes out while close() waits for the commands in flight.
TEST_F(CloseTest, ADecisionStartedJustBeforeCloseIsAnsweredEvenIfRedisForgotItsScript) {
  ClientOptions without_stats = options();
  without_stats.stats_interval = 0ms;  // nothing else for close() to send and wait for first
  Client client(loop(), without_stats);
  Limiter limiter(client, Policy::of(Limit::gcra(Rate{10, 1h})),
                  LimiterOptions{.name = "noscript"});
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k")).allowed);
  server_.command({"SCRIPT", "FLUSH"});
  // Why: the NOSCRIPT answer comes after close() has begun to close the connection.
  server_.command({"CLIENT", "PAUSE", "200", "ALL"});
  Decision decision;
  run(loop(), [&]() -> Task<void> {
    TaskGroup group;
    group.add(decide_into(limiter, &decision));
    co_await client.close();
    co_await group.join();
  }());
  EXPECT_TRUE(decision.allowed);
  EXPECT_EQ(decision.remaining, 8);
}

}  // namespace
}  // namespace redlimit
