// A call from a thread other than the loop's is a UsageError, and it leaves nothing behind: the
// client then closes and the loop closes with no handle left.

#include <gtest/gtest.h>

#include <exception>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <tuple>

#include "redlimit/callback.hpp"
#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/policy_store.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/semaphore.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

/// What the calls are made on, all made on the loop's thread.
struct Targets {
  Client& client;
  Limiter& limiter;
  Limiter& following;
  Semaphore& semaphore;
  PolicyStore& store;
  std::optional<Lease>& lease;
};

using Call = Task<void> (*)(Targets&);

Task<void> limiter_try_acquire(Targets& t) {
  co_await t.limiter.try_acquire("k");
}
Task<void> limiter_acquire(Targets& t) {
  co_await t.limiter.acquire("k");
}
Task<void> limiter_peek(Targets& t) {
  co_await t.limiter.peek("k");
}
Task<void> limiter_reset(Targets& t) {
  co_await t.limiter.reset("k");
}
/// The callback style: the call itself throws, and `done` is never called.
Task<void> limiter_try_acquire_with_callback(Targets& t) {
  t.limiter.try_acquire("k", 1, [](Result<Decision>) { ADD_FAILURE() << "done was called"; });
  co_return;
}
Task<void> limiter_acquire_with_callback(Targets& t) {
  t.limiter.acquire("k", 1, {}, [](Result<Decision>) { ADD_FAILURE() << "done was called"; });
  co_return;
}
Task<void> following_try_acquire(Targets& t) {
  co_await t.following.try_acquire("k");
}
Task<void> following_acquire(Targets& t) {
  co_await t.following.acquire("k");
}
Task<void> semaphore_try_acquire(Targets& t) {
  co_await t.semaphore.try_acquire("k");
}
Task<void> semaphore_acquire(Targets& t) {
  co_await t.semaphore.acquire("k");
}
Task<void> client_command(Targets& t) {
  co_await t.client.command("PING");
}
Task<void> client_connect(Targets& t) {
  co_await t.client.connect();
}
Task<void> store_get(Targets& t) {
  co_await t.store.get("followed");
}
Task<void> store_try_set(Targets& t) {
  co_await t.store.try_set("other", Policy::parse("gcra 5/s"));
}

Task<void> lease_renew(Targets& t) {
  co_await t.lease->renew();
}
Task<void> lease_release(Targets& t) {
  co_await t.lease->release();
}
/// A destructor cannot throw: its UsageError goes to the error handler (rethrown here).
Task<void> lease_destroyed(Targets& t) {
  std::exception_ptr reported;
  const ErrorHandler before =
      set_error_handler([&reported](std::exception_ptr error) { reported = error; });
  t.lease.reset();
  set_error_handler(before);
  if (reported) std::rethrow_exception(reported);
  co_return;
}

struct Entry {
  const char* name;
  Call call;
};

void PrintTo(const Entry& entry, std::ostream* out) {
  *out << entry.name;
}

const Entry entries[] = {
    {"LimiterTryAcquire", limiter_try_acquire},
    {"LimiterAcquire", limiter_acquire},
    {"LimiterPeek", limiter_peek},
    {"LimiterReset", limiter_reset},
    {"LimiterTryAcquireWithCallback", limiter_try_acquire_with_callback},
    {"LimiterAcquireWithCallback", limiter_acquire_with_callback},
    {"FollowingLimiterTryAcquire", following_try_acquire},
    {"FollowingLimiterAcquire", following_acquire},
    {"SemaphoreTryAcquire", semaphore_try_acquire},
    {"SemaphoreAcquire", semaphore_acquire},
    {"ClientCommand", client_command},
    {"ClientConnect", client_connect},
    {"PolicyStoreGet", store_get},
    {"PolicyStoreTrySet", store_try_set},
    {"LeaseRenew", lease_renew},
    {"LeaseRelease", lease_release},
    {"LeaseDestroyed", lease_destroyed},
};

/// Parameters: the entry point, and whether the loop's thread used everything first (so that
/// connections, subscriptions and caches exist when the other thread calls).
class WrongThreadTest : public test::LoopTest,
                        public ::testing::WithParamInterface<std::tuple<Entry, bool>> {
 protected:
  void TearDown() override {
    limiter_.reset();
    following_.reset();
    semaphore_.reset();
    run(loop(), client_.close());
    LoopTest::TearDown();
  }

  test::RedisServer server_;
  Client client_{
      loop(), ClientOptions{.url = server_.url(), .command_timeout = 2s, .reservation_lease = 6s}};
  PolicyStore store_{client_};
  std::unique_ptr<Limiter> limiter_ = std::make_unique<Limiter>(client_, Policy::parse("gcra 10/s"),
                                                                LimiterOptions{.name = "direct"});
  std::unique_ptr<Limiter> following_ =
      std::make_unique<Limiter>(client_, LimiterOptions{.name = "followed"});
  std::unique_ptr<Semaphore> semaphore_ = std::make_unique<Semaphore>(client_, 2, "leases");
};

Task<void> use_everything(Targets& t) {
  co_await t.store.set("followed", Policy::parse("gcra 10/s"));
  co_await t.limiter.try_acquire("k");
  co_await t.limiter.acquire("k");
  co_await t.following.try_acquire("k");
  co_await t.following.acquire("k");
  auto lease = co_await t.semaphore.acquire("k");
  co_await lease.release();
}

Task<void> hold_lease(Targets& t) {
  t.lease = co_await t.semaphore.acquire("held");
}

TEST_P(WrongThreadTest, IsAUsageErrorThatLeavesNothingBehind) {
  const auto& [entry, used_first] = GetParam();
  std::optional<Lease> lease;
  Targets targets{client_, *limiter_, *following_, *semaphore_, store_, lease};
  if (used_first) run(loop(), use_everything(targets));
  run(loop(), hold_lease(targets));
  std::exception_ptr error;
  bool done = false;
  int other_loop_closed = -1;
  std::thread other([&targets, &error, &done, &other_loop_closed, call = entry.call] {
    uv_loop_t other_loop;
    uv_loop_init(&other_loop);
    try {
      run(&other_loop, call(targets));
    } catch (...) {
      error = std::current_exception();
    }
    done = true;
    other_loop_closed = uv_loop_close(&other_loop);
  });
  other.join();
  ASSERT_TRUE(done) << "the call must fail at once, not wait on the loop's thread";
  ASSERT_TRUE(error) << "the call must raise UsageError";
  EXPECT_THROW(std::rethrow_exception(error), UsageError);
  EXPECT_EQ(other_loop_closed, 0) << "the other thread's loop holds nothing of the call";
}

INSTANTIATE_TEST_SUITE_P(EntryPoints, WrongThreadTest,
                         ::testing::Combine(::testing::ValuesIn(entries), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) +
                                  (std::get<1>(info.param) ? "AfterUse" : "First");
                         });

}  // namespace
}  // namespace redlimit
