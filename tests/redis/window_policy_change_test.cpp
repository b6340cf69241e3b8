// The window algorithms across Limiter::set_policy(), in Redis and in process: a change never
// gives back a limit that was used (issue 14, bugs 1 and 3), and what was admitted before counts
// as the carry says (docs/algorithms.md, "Changing a policy").
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "limiter/local_backend.hpp"
#include "limiter/redis_backend.hpp"
#include "policy/compiled_policy.hpp"
#include "policy/stale_policy.hpp"
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
  int drain(Limiter& limiter, int permits = 1) {
    int admitted = 0;
    while (run(loop(), limiter.try_acquire("k", permits)).allowed)
      admitted += permits;
    return admitted;
  }
  void sleep(std::chrono::microseconds d) { run(loop(), sleep_for(loop(), d)); }
  /// Waits for the first 500 ms of a wall-clock second, so that a few requests at 10/s all fall
  /// in one aligned window.
  void start_early_in_a_second() {
    const std::int64_t into = wall_clock_us() % 1'000'000;
    if (into > 500'000) sleep(std::chrono::microseconds(1'000'000 - into + 10'000));
  }

  /// The backend the limiters use, driven directly with an injected time.
  detail::Backend& backend() {
    if (in_redis()) return redis_backend_;
    return local_backend_;
  }
  /// Decides `permits` on key "k" under `policy` at `now`.
  Decision decide(const std::shared_ptr<const detail::CompiledPolicy>& policy, std::int64_t now,
                  std::int64_t permits = 1,
                  detail::Operation operation = detail::Operation::acquire) {
    return run(loop(), backend().decide(detail::DecideRequest(policy, detail::KeyBase("{k}"),
                                                              operation, permits, now)));
  }
  test::RedisServer server_;

 private:
  Client client_{loop(), ClientOptions{.url = server_.url()}};
  detail::RedisBackend redis_backend_{client_.dispatcher()};
  detail::LocalBackend local_backend_;
};

constexpr std::int64_t hour_us = 3'600'000'000;
constexpr std::int64_t t0 = 1'795'000'000LL * 1'000'000 / hour_us * hour_us;  // an hour's start

std::shared_ptr<const detail::CompiledPolicy> compiled(Algorithm algorithm, Rate rate,
                                                       detail::PolicyEpoch epoch = {}) {
  return detail::CompiledPolicy::compile(one(algorithm, rate), epoch);
}

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

TEST_P(WindowPolicyChange, AsIsKeepsTheCountProportionalScalesItResetStartsAfresh) {
  struct Expected {
    Carry carry;
    int fixed_window, sliding_window_log, sliding_window_counter;
  };
  // 8 of 10 admitted, then 20 per hour: as_is keeps 8 used, proportional makes them 16 (the log
  // keeps its entries as they are), reset forgets them.
  for (const auto& [carry, fixed, log, counter] :
       {Expected{Carry::as_is, 12, 12, 12}, Expected{Carry::proportional, 4, 12, 4},
        Expected{Carry::reset, 20, 20, 20}}) {
    for (const Algorithm algorithm : window_algorithms) {
      auto limits = limiter(one(algorithm, {10, 1h}), algorithm);
      run(loop(), limits->reset("k"));
      EXPECT_TRUE(run(loop(), limits->try_acquire("k", 8)).allowed);
      limits->set_policy(one(algorithm, {20, 1h}), carry);
      const int expected = algorithm == Algorithm::fixed_window         ? fixed
                           : algorithm == Algorithm::sliding_window_log ? log
                                                                        : counter;
      EXPECT_EQ(drain(*limits), expected)
          << to_string(algorithm) << " carry " << static_cast<int>(carry);
    }
  }
}

TEST_P(WindowPolicyChange, ANewerVersionsStateRefusesAnOlderVersionAndIsNotWritten) {
  for (const Algorithm algorithm : window_algorithms) {
    run(loop(), backend().reset(compiled(algorithm, {10, 1h}), "{k}"));
    EXPECT_TRUE(decide(compiled(algorithm, {10, 1h}, {.version = 7}), t0, 3).allowed);
    try {
      decide(compiled(algorithm, {20, 1h}, {.version = 6}), t0 + 1);
      ADD_FAILURE() << to_string(algorithm) << ": an older version was not refused";
    } catch (const detail::StalePolicy& stale) {
      EXPECT_EQ(stale.stored_version(), 7) << to_string(algorithm);
    }
    // Nothing was written: version 7 still sees its 3 permits.
    EXPECT_EQ(
        decide(compiled(algorithm, {10, 1h}, {.version = 7}), t0 + 2, 1, detail::Operation::peek)
            .remaining,
        7)
        << to_string(algorithm);
    // A newer version and a limiter that follows no store (version 0) are decided.
    EXPECT_EQ(decide(compiled(algorithm, {10, 1h}, {.version = 8}), t0 + 3).remaining, 6);
    EXPECT_EQ(decide(compiled(algorithm, {10, 1h}), t0 + 4).remaining, 5);
  }
}

TEST_P(WindowPolicyChange, APeekConvertsWithoutWriting) {
  for (const Algorithm algorithm : window_algorithms) {
    run(loop(), backend().reset(compiled(algorithm, {10, 1h}), "{k}"));
    EXPECT_TRUE(decide(compiled(algorithm, {10, 1h}), t0, 8).allowed);
    const auto reset = compiled(algorithm, {20, 1h}, {.since_us = t0 + 1, .carry = Carry::reset});
    EXPECT_EQ(decide(reset, t0 + 1, 1, detail::Operation::peek).remaining, 20)
        << to_string(algorithm);
    // The peek left the state as it was: the change is carried over by the next acquire.
    EXPECT_EQ(decide(compiled(algorithm, {10, 1h}), t0 + 2, 1, detail::Operation::peek).remaining,
              2)
        << to_string(algorithm);
  }
}

// A process that has not heard of a change yet decides under the old version after its since,
// past the end of the old window that held since: its write starts a new window and drops the
// count of the one that held since. That window was admitted before since: the new version counts
// it as full (the old limit), as it overlaps the new window. 100/s exhausted just before since,
// a late write 1.3 ms after it in the next second, then 10/min: nothing is left to admit.
TEST_P(WindowPolicyChange, ALateOldVersionWriteThatStartsAWindowKeepsTheLostWindowCounted) {
  const std::int64_t since = t0 + 999'000;  // in the second [t0, t0 + 1 s)
  for (const Window window : {Window::aligned, Window::anchored}) {
    SCOPED_TRACE(window == Window::aligned ? "aligned" : "anchored");
    const auto old_version = detail::CompiledPolicy::compile(
        Policy::of(Limit::fixed_window("100/s", window)), {.version = 1});
    const auto new_version =
        detail::CompiledPolicy::compile(Policy::of(Limit::fixed_window("10/min", window)),
                                        {.version = 2, .since_us = since, .carry = Carry::as_is});
    run(loop(), backend().reset(old_version, "{k}"));
    // Anchored: the window [t0 + 300 us, since + 1.3 ms) holds since.
    EXPECT_TRUE(decide(old_version, window == Window::aligned ? since - 1 : t0 + 300, 100).allowed);
    EXPECT_TRUE(decide(old_version, since + 1'300).allowed);  // the late write: a new window
    int admitted = 0;
    for (int i = 0; i < 20; ++i)
      admitted += decide(new_version, since + 2'000 + i).allowed ? 1 : 0;
    EXPECT_EQ(admitted, 0) << "the window holding since was exhausted";
  }
}

// The sliding window counter keeps two windows: the one holding since and the one before, both
// admitted before since, carry over (each lands in the new window it overlaps). A late
// old-version write that rolls the counters on drops one of them (a window on) or both (two
// windows on): each dropped one counts as full (the old limit) where it lands. Then 10/min:
// nothing is left to admit.
TEST_P(WindowPolicyChange, ALateOldVersionWriteThatRollsTheCountersKeepsTheLostWindowsCounted) {
  struct Case {
    const char* what;
    const char* old_rate;
    std::int64_t exhausted_at, since;
  };
  for (const auto& [what, old_rate, exhausted_at, since] : {
           // 100/ms exhausted in [t0, t0 + 1 ms), which holds since; the late write at
           // t0 + 2.2 ms is two windows on: its previous window, [t0 + 1 ms, t0 + 2 ms), is empty.
           Case{"the window holding since", "100/ms", t0 + 899, t0 + 900},
           // 100/s exhausted in [t0, t0 + 1 s), the window before the one holding since (which
           // admitted none); the late write at t0 + 2.0003 s is one window on.
           Case{"the window before", "100/s", t0 + 500'000, t0 + 1'999'000},
       }) {
    SCOPED_TRACE(what);
    const auto old_version = detail::CompiledPolicy::compile(
        Policy::of(Limit::sliding_window_counter(old_rate)), {.version = 1});
    const auto new_version =
        detail::CompiledPolicy::compile(Policy::of(Limit::sliding_window_counter("10/min")),
                                        {.version = 2, .since_us = since, .carry = Carry::as_is});
    run(loop(), backend().reset(old_version, "{k}"));
    EXPECT_TRUE(decide(old_version, exhausted_at, 100).allowed);
    EXPECT_TRUE(decide(old_version, since + 1'300).allowed);  // the late write: rolled on
    int admitted = 0;
    for (int i = 0; i < 20; ++i)
      admitted += decide(new_version, since + 2'000 + i).allowed ? 1 : 0;
    EXPECT_EQ(admitted, 0) << "100 permits were admitted in a window that lands in this minute";
  }
}

// Issue 32, bug 6: set_policy() of the same policy with Carry::reset reset nothing (the key's
// stamp, its parameters and version 0, did not change). It makes an exhausted key full again,
// once: the permits taken after the reset stay taken.
TEST_P(WindowPolicyChange, SetPolicyOfTheSamePolicyWithResetMakesAnExhaustedKeyFullOnce) {
  for (const Algorithm algorithm : window_algorithms) {
    SCOPED_TRACE(to_string(algorithm));
    auto limits = limiter(one(algorithm, {10, 1h}), algorithm);
    run(loop(), limits->reset("k"));
    EXPECT_TRUE(run(loop(), limits->try_acquire("k", 10)).allowed);
    EXPECT_FALSE(run(loop(), limits->try_acquire("k")).allowed);
    limits->set_policy(one(algorithm, {10, 1h}), Carry::reset);
    int admitted = 0;
    for (int i = 0; i < 30; ++i)
      admitted += run(loop(), limits->try_acquire("k")).allowed ? 1 : 0;
    EXPECT_EQ(admitted, 10) << "full again once (0: no reset; more: the reset applied again)";
  }
}

/// The epoch of set_policy(policy, Carry::reset) called at `since_us` on a limiter that follows
/// no store.
detail::PolicyEpoch reset_at(std::int64_t since_us) {
  return {.version = 0, .since_us = since_us, .carry = Carry::reset};
}

// Another process of the same name, with the same fixed policy and no reset (as_is, version 0),
// writes the key between two decisions of the resetting limiter: the reset is not applied again
// (that would free permits at every such write).
TEST_P(WindowPolicyChange, AnotherProcessOfTheSameNameDoesNotMakeTheResetApplyAgain) {
  for (const Algorithm algorithm : window_algorithms) {
    SCOPED_TRACE(to_string(algorithm));
    const auto fixed = compiled(algorithm, {10, 1h});
    const auto resetting = compiled(algorithm, {10, 1h}, reset_at(t0 + 7));
    run(loop(), backend().reset(fixed, "{k}"));
    EXPECT_TRUE(decide(fixed, t0 + 5, 10).allowed);
    EXPECT_FALSE(decide(fixed, t0 + 6).allowed);
    EXPECT_TRUE(decide(resetting, t0 + 8, 5).allowed) << "the reset made the key full";
    EXPECT_TRUE(decide(fixed, t0 + 9).allowed);  // the other process: 4 left
    EXPECT_FALSE(decide(resetting, t0 + 10, 5).allowed)
        << "the other process's write made the reset apply again";
    EXPECT_TRUE(decide(resetting, t0 + 11, 4).allowed);
    EXPECT_FALSE(decide(resetting, t0 + 12).allowed) << "the reset applied again";
    EXPECT_FALSE(decide(fixed, t0 + 13).allowed);
  }
}

// set_policy()'s since is the client's system clock; a Redis clock behind it decides at a now
// before since (the conversion is at now then: a log drops every entry up to now). The reset
// applies once, not at every call until Redis's clock passes since.
TEST_P(WindowPolicyChange, AResetWhoseSinceIsAheadOfTheDecisionsClockAppliesOnce) {
  for (const Algorithm algorithm : window_algorithms) {
    SCOPED_TRACE(to_string(algorithm));
    const auto fixed = compiled(algorithm, {10, 1h});
    const auto resetting = compiled(algorithm, {10, 1h}, reset_at(t0 + 10'000'000));
    run(loop(), backend().reset(fixed, "{k}"));
    EXPECT_TRUE(decide(fixed, t0 + 5, 10).allowed);
    EXPECT_TRUE(decide(resetting, t0 + 6, 10).allowed) << "the reset made the key full";
    EXPECT_FALSE(decide(resetting, t0 + 7).allowed) << "the reset applied again";
    EXPECT_FALSE(decide(resetting, t0 + 8).allowed) << "the reset applied again";
  }
}

INSTANTIATE_TEST_SUITE_P(RedisAndInProcess, WindowPolicyChange, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("Redis") : std::string("InProcess");
                         });

// ---- Redis only: the stored formats

/// A limiter test on a private redis-server, reading the stored values.
class StoredWindow : public test::LoopTest {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    EXPECT_TRUE(server_.keys_without_ttl().empty()) << "a key without TTL was left";
    LoopTest::TearDown();
  }
  Decision decide(const std::shared_ptr<const detail::CompiledPolicy>& policy, std::int64_t now,
                  std::int64_t permits = 1) {
    return run(loop(),
               backend_.decide(detail::DecideRequest(policy, detail::KeyBase("{k}"),
                                                     detail::Operation::acquire, permits, now)));
  }
  Reply command(std::vector<std::string> argv) {
    return run(loop(), client_.command(std::move(argv)));
  }

  test::RedisServer server_;

 private:
  Client client_{loop(), ClientOptions{.url = server_.url()}};
  detail::RedisBackend backend_{client_.dispatcher()};
};

TEST_F(StoredWindow, ValuesCarryTheirParametersAndPolicyVersion) {
  decide(compiled(Algorithm::fixed_window, {10, 1h}, {.version = 4}), t0 + 5, 2);
  EXPECT_EQ(command({"GET", "{k}:fixed_window:0"}).as_string(),
            std::to_string(t0) + ":2:10:3600000000:0:4");
  decide(compiled(Algorithm::sliding_window_counter, {10, 1h}, {.version = 4}), t0 + 5, 2);
  EXPECT_EQ(command({"GET", "{k}:sliding_window_counter:0"}).as_string(),
            std::to_string(t0) + ":2:0:10:3600000000:4");
  decide(compiled(Algorithm::sliding_window_log, {10, 1h}, {.version = 4}), t0 + 5, 2);
  const auto log = command({"ZRANGE", "{k}:sliding_window_log:0", "0", "-1"}).as_array();
  ASSERT_EQ(log.size(), 3U);
  EXPECT_EQ(log[0].as_string(), "stamp:10:3600000000:4");
}

TEST_F(StoredWindow, ADenialThatCarriesTheStateOverGivesItTheNewPolicysLifetime) {
  for (const Algorithm algorithm : window_algorithms) {
    const std::string key = "{k}:" + std::string(to_string(algorithm)) + ":0";
    EXPECT_TRUE(decide(compiled(algorithm, {10, 1s}), t0, 10).allowed);
    // With an injected time keys live an hour longer than their state matters: under 10/s the
    // key would be gone 1 or 2 s after the hour, under 10/h it matters until the hour's end.
    EXPECT_LE(command({"PTTL", key}).as_integer(), 3'602'000) << to_string(algorithm);
    EXPECT_FALSE(decide(compiled(algorithm, {10, 1h}), t0 + 100'000).allowed);
    EXPECT_GT(command({"PTTL", key}).as_integer(), 7'000'000) << to_string(algorithm);
  }
}

TEST_F(StoredWindow, ThePreviousReleasesValuesAreReadAndStampedOnFirstTouch) {
  const std::string start = std::to_string(t0);
  command({"SET", "{k}:fixed_window:0", start + ":10", "PX", "60000"});
  command({"SET", "{k}:sliding_window_counter:0", start + ":10:0", "PX", "60000"});
  command({"ZADD", "{k}:sliding_window_log:0", start, start + ":0"});
  command({"PEXPIRE", "{k}:sliding_window_log:0", "60000"});
  for (const Algorithm algorithm : window_algorithms) {
    const Decision denied = decide(
        compiled(algorithm, {algorithm == Algorithm::sliding_window_log ? 1 : 10, 1h}), t0 + 1);
    EXPECT_FALSE(denied.allowed) << to_string(algorithm) << ": the stored count still holds";
  }
  EXPECT_EQ(command({"GET", "{k}:fixed_window:0"}).as_string(), start + ":10:10:3600000000:0:0");
  EXPECT_EQ(command({"GET", "{k}:sliding_window_counter:0"}).as_string(),
            start + ":10:0:10:3600000000:0");
  EXPECT_EQ(command({"ZRANGE", "{k}:sliding_window_log:0", "0", "0"}).as_array()[0].as_string(),
            "stamp:1:3600000000:0");
}

}  // namespace
}  // namespace redlimit
