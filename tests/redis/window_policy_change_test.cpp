// The window algorithms across Limiter::set_policy(), in Redis and in process: a change never
// gives back a limit that was used (issue 14, bugs 1 and 3), and what was admitted before counts
// as the carry says (docs/algorithms.md, "Changing a policy").
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "redlimit/client.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/runtime.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

const Algorithm window_algorithms[] = {Algorithm::fixed_window, Algorithm::sliding_window_log,
                                       Algorithm::sliding_window_counter};

Policy one(Algorithm algorithm, Rate rate) {
  return Policy::of(Limit{algorithm, rate, 0, Window::aligned});
}

std::int64_t wall_clock_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Each test runs twice: against a private redis-server, and in process.
class WindowPolicyChange : public test::LoopTest, public ::testing::WithParamInterface<bool> {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    EXPECT_TRUE(server_.keys_without_ttl().empty()) << "a key without TTL was left";
    LoopTest::TearDown();
  }
  bool in_redis() const { return GetParam(); }
  std::unique_ptr<Limiter> limiter(Policy policy, Algorithm algorithm) {
    LimiterOptions options{.name = std::string(to_string(algorithm)), .deny_cache = false};
    if (in_redis()) return std::make_unique<Limiter>(client_, std::move(policy), options);
    return std::make_unique<Limiter>(loop(), std::move(policy), options);
  }
  /// Admits one at a time until denied; returns how many were admitted.
  int drain(Limiter& limiter) {
    int admitted = 0;
    while (run(loop(), limiter.try_acquire("k")).allowed)
      ++admitted;
    return admitted;
  }
  void sleep(std::chrono::microseconds d) { run(loop(), sleep_for(loop(), d)); }
  /// Waits for the first 500 ms of a wall-clock second, so that a few requests at 10/s all fall
  /// in one aligned window.
  void start_early_in_a_second() {
    const std::int64_t into = wall_clock_us() % 1'000'000;
    if (into > 500'000) sleep(std::chrono::microseconds(1'000'000 - into + 10'000));
  }

  test::RedisServer server_;

 private:
  Client client_{loop(), ClientOptions{.url = server_.url()}};
};

TEST_P(WindowPolicyChange, ALongerPeriodKeepsTheUsedLimitPastTheOldKeysLifetime) {
  for (const Algorithm algorithm : window_algorithms) {
    start_early_in_a_second();
    auto limits = limiter(one(algorithm, {10, 1s}), algorithm);
    EXPECT_EQ(drain(*limits), 10) << to_string(algorithm);
    limits->set_policy(one(algorithm, {10, 1h}));
    EXPECT_FALSE(run(loop(), limits->try_acquire("k")).allowed) << to_string(algorithm);
    sleep(2200ms);  // the old policy's state mattered for 1 s
    EXPECT_EQ(drain(*limits), 0) << to_string(algorithm);
  }
}

TEST_P(WindowPolicyChange, AShorterPeriodCountsWhatTheStoredWindowAdmitted) {
  for (const Algorithm algorithm : {Algorithm::fixed_window, Algorithm::sliding_window_counter}) {
    auto limits = limiter(one(algorithm, {10, 1h}), algorithm);
    EXPECT_EQ(drain(*limits), 10) << to_string(algorithm);
    limits->set_policy(one(algorithm, {10, 1min}));
    EXPECT_EQ(drain(*limits), 0) << to_string(algorithm);
  }
}

INSTANTIATE_TEST_SUITE_P(RedisAndInProcess, WindowPolicyChange, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("Redis") : std::string("InProcess");
                         });

}  // namespace
}  // namespace redlimit
