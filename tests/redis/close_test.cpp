// Client::close() waits for the library's own background work (lease releases, refunds of
// abandoned reservations) before it closes the connections, and answers the decisions in
// flight.

#include <gtest/gtest.h>

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
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

/// Sends `call`'s grant to a paused Redis and abandons it before its reply; keeps Redis paused
/// `then` longer, resumes it and closes the client. Returns the permits "tenant" holds then.
long long permits_held_after_abandoning_a_grant(uv_loop_t* loop, test::RedisServer& server,
                                                ClientOptions options,
                                                Task<void> (*call)(Semaphore&),
                                                std::chrono::milliseconds then) {
  {
    Client client(loop, options);
    Semaphore semaphore(client, 1, "exports", 20s);
    run(loop, semaphore.try_acquire("other"));  // connected, its scripts loaded
    server.pause();
    {
      test::StartedTask granting = test::start(call(semaphore));
      run(loop, sleep_for(loop, 20ms));  // sent; Redis has not run it
      EXPECT_FALSE(granting.done());
    }  // abandoned before the reply
    run(loop, sleep_for(loop, then));
    server.resume();
    run(loop, client.close());
  }
  return server.integer({"ZCOUNT", "rl:{exports:tenant}:semaphore", "(0", "+inf"});
}

// Found in review (not named by an issue): a semaphore's grant whose caller was destroyed before
// its reply arrived held its permit for the whole lease TTL, with no lease to release it.
TEST_F(CloseTest, ASemaphoreGrantAbandonedBeforeItsReplyArrivedIsReleasedWhenItArrives) {
  for (auto* call : {&acquire_one, &try_acquire_one}) {
    EXPECT_EQ(permits_held_after_abandoning_a_grant(loop(), server_, options(), call, 0ms), 0)
        << "the grant abandoned before its reply holds the permit for the lease TTL";
  }
}

// Found in review (not named by an issue): the same grant, timed out after its caller was gone
// (maybe run by Redis), was never released: only a live caller released a grant that may have
// happened.
TEST_F(CloseTest, ASemaphoreGrantAbandonedThenTimedOutIsReleasedOnceRedisMayHaveRunIt) {
  ClientOptions timing_out = options();
  timing_out.command_timeout = 600ms;
  for (auto* call : {&acquire_one, &try_acquire_one}) {
    // Past the grant's deadline (maybe granted, never heard), not past its release's: resumed,
    // Redis runs the grant and the release, in either order (the grant may come second: voided).
    EXPECT_EQ(permits_held_after_abandoning_a_grant(loop(), server_, timing_out, call, 650ms), 0)
        << "the grant abandoned, then timed out, holds the permit for the lease TTL";
  }
}

Task<void> decide_into(Limiter& limiter, Decision* out) {
  *out = co_await limiter.try_acquire("k");
}

// Why it matters: after a restart or a SCRIPT FLUSH, the decision's EVALSHA meets NOSCRIPT, and
// the reload that completes it goes out while close() waits for the commands in flight.
/// What a call ended with: "ok", the name of its error type, or "running".
struct Ending {
  std::string how = "running";
  bool closed_before = false;  ///< close() had returned when it ended
};

template <class Call>
Task<void> ending_of(Call call, Ending* ending, const bool* closed) {
  try {
    co_await std::move(call);
    ending->how = "ok";
  } catch (const Cancelled&) {
    ending->how = "Cancelled";
  } catch (const UsageError&) {
    ending->how = "UsageError";
  } catch (const Error&) {
    ending->how = "Error";
  }
  ending->closed_before = *closed;
}

/// Starts `calls`, closes the client once they wait, and records how each ended.
Task<void> close_while_waiting(uv_loop_t* loop, Client& client, std::vector<Task<void>> calls) {
  TaskGroup waiting;
  for (Task<void>& call : calls)
    waiting.add(std::move(call));
  co_await sleep_for(loop, 100ms);
  co_await client.close();
  co_await waiting.join();
}

TEST_F(CloseTest, CloseEndsTheCallsWaitingForPermitsCancelledAndGivesTheirReservationsBack) {
  const Policy reservable = Policy::of({Algorithm::gcra, {1, 10s}, 1, Window::aligned});
  const Policy windowed = Policy::parse("fixed_window 1/1d anchored");
  Client client(loop(), options());
  Limiter gcra(client, reservable, LimiterOptions{.name = "closing-gcra"});
  Limiter window(client, windowed, LimiterOptions{.name = "closing-window"});
  Semaphore semaphore(client, 1, "closing-semaphore", 20s);
  ASSERT_TRUE(run(loop(), gcra.try_acquire("k")).allowed);
  ASSERT_TRUE(run(loop(), window.try_acquire("k")).allowed);
  std::optional<Lease> held = run(loop(), semaphore.try_acquire("k"));
  ASSERT_TRUE(held.has_value());
  bool closed = false;
  std::array<Ending, 4> endings;
  run(loop(), [&]() -> Task<void> {
    std::vector<Task<void>> calls;
    calls.push_back(ending_of(gcra.acquire("k"), &endings[0], &closed));
    calls.push_back(ending_of(window.acquire("k"), &endings[1], &closed));
    calls.push_back(ending_of(semaphore.acquire("k"), &endings[2], &closed));
    std::vector<Claim> claims(2);
    claims[0] = Claim{.limiter = &gcra, .key = "k"};
    claims[1] = Claim{.limiter = &window, .key = "other"};
    calls.push_back(ending_of(acquire_all(std::move(claims)), &endings[3], &closed));
    co_await close_while_waiting(loop(), client, std::move(calls));
    closed = true;
  }());
  for (const Ending& ending : endings) {
    EXPECT_EQ(ending.how, "Cancelled");
    EXPECT_FALSE(ending.closed_before) << "close() returned before the call ended";
  }
  held.reset();  // its client is closed: its permit comes back at expiry
  // The reservations were given back: the next permit of "k" is 10 s after the first, not 20 s.
  Client reader(loop(), options());
  Limiter again(reader, reservable, LimiterOptions{.name = "closing-gcra"});
  const Decision next = run(loop(), again.peek("k"));
  EXPECT_LE(next.retry_after, 10s);
  run(loop(), reader.close());
}

TEST_F(CloseTest, ACallThatWouldWaitStartedWhileTheClientClosesIsCancelledAndReservesNothing) {
  const Policy reservable = Policy::of({Algorithm::gcra, {1, 10s}, 1, Window::aligned});
  Client client(loop(), options());
  Limiter limiter(client, reservable, LimiterOptions{.name = "closing-late"});
  ASSERT_TRUE(run(loop(), limiter.try_acquire("a")).allowed);
  ASSERT_TRUE(run(loop(), limiter.try_acquire("b")).allowed);
  bool closed = false;
  std::array<Ending, 2> endings;
  run(loop(), [&]() -> Task<void> {
    TaskGroup calls;
    calls.add(ending_of(limiter.acquire("a"), &endings[0], &closed));
    co_await sleep_for(loop(), 100ms);  // "a" waits: close() waits for it to end
    calls.add([](Client& client, bool* closed) -> Task<void> {
      co_await client.close();
      *closed = true;
    }(client, &closed));
    calls.add(ending_of(limiter.acquire("b"), &endings[1], &closed));
    co_await calls.join();
  }());
  EXPECT_EQ(endings[0].how, "Cancelled");
  EXPECT_EQ(endings[1].how, "Cancelled");
  EXPECT_FALSE(endings[1].closed_before);
  Client reader(loop(), options());
  Limiter again(reader, reservable, LimiterOptions{.name = "closing-late"});
  EXPECT_LE(run(loop(), again.peek("b")).retry_after, 10s) << "b's next slot was reserved";
  run(loop(), reader.close());
}

TEST_F(CloseTest, ASemaphoreGrantInFlightWhenCloseBeginsIsReleasedAndItsCallCancelled) {
  Client client(loop(), options());
  Semaphore semaphore(client, 1, "closing-grant", 20s);
  run(loop(), client.connect());
  bool closed = false;
  Ending ending;
  run(loop(), [&]() -> Task<void> {
    server_.pause();
    TaskGroup calls;
    calls.add(ending_of(semaphore.acquire("k"), &ending, &closed));
    calls.add([](uv_loop_t* loop, test::RedisServer& server) -> Task<void> {
      co_await sleep_for(loop, 100ms);
      server.resume();
    }(loop(), server_));
    co_await sleep_for(loop(), 20ms);  // the grant waits for its reply
    co_await client.close();
    closed = true;
    co_await calls.join();
  }());
  EXPECT_EQ(ending.how, "Cancelled");
  EXPECT_EQ(server_.integer({"ZCOUNT", "rl:{closing-grant:k}:semaphore", "(0", "+inf"}), 0)
      << "the grant stays held for the lease TTL";
}

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
