// The window algorithms' models across a policy change, as specifications: what a stored
// window's count becomes under new parameters (docs/algorithms.md, "Changing a policy"). The
// differential test (tests/redis) shows the scripts carry exactly as these models do.
#include <gtest/gtest.h>

#include <cstdint>

#include "algorithms/fixed_window.hpp"
#include "algorithms/sliding_window_counter.hpp"
#include "algorithms/sliding_window_log.hpp"

namespace redlimit::detail {
namespace {

constexpr std::int64_t second = 1'000'000;
constexpr std::int64_t minute = 60 * second;
constexpr std::int64_t hour = 60 * minute;
constexpr std::int64_t t0 = 1'699'999'200LL * second;  // a multiple of an hour

/// One key of a window algorithm, driven with explicit times and policies; writes what the
/// script would write (admissions, and a carried-over state also when denied).
template <class Params, class State, auto decide>
class Key {
 public:
  LimitOutcome acquire(const Params& params, std::int64_t now, std::int64_t n = 1,
                       PolicyChange change = {}) {
    State next = state_.value_or(State{});
    const LimitOutcome out = decide(params, change, state_ ? &*state_ : nullptr, now, n, &next);
    if (out.allowed || out.rewritten) state_ = next;
    return out;
  }
  LimitOutcome peek(const Params& params, std::int64_t now, PolicyChange change = {}) const {
    return decide(params, change, state_ ? &*state_ : nullptr, now, 1, nullptr);
  }
  int drain(const Params& params, std::int64_t now, PolicyChange change = {}) {
    int admitted = 0;
    while (acquire(params, now, 1, change).allowed)
      ++admitted;
    return admitted;
  }
  std::optional<State>& state() { return state_; }

 private:
  std::optional<State> state_;
};

using FixedWindowKey = Key<FixedWindowParams, FixedWindowState, decide_fixed_window>;
using CounterKey =
    Key<SlidingWindowCounterParams, SlidingWindowCounterState, decide_sliding_window_counter>;
using LogKey = Key<SlidingWindowLogParams, SlidingWindowLogState, decide_sliding_window_log>;

FixedWindowParams fixed(std::int64_t limit, std::int64_t period, bool anchored = false) {
  return {limit, period, anchored};
}
PolicyChange carry(Carry how, std::int64_t since = 0, std::int64_t version = 0) {
  return {version, since, how};
}

// ---- fixed_window

TEST(FixedWindowCarry, ADenialAfterALongerPeriodKeepsTheStateForTheNewWindow) {
  FixedWindowKey key;
  EXPECT_EQ(key.drain(fixed(10, second), t0), 10);
  const LimitOutcome denied = key.acquire(fixed(10, hour), t0 + 100'000);
  EXPECT_FALSE(denied.allowed);
  EXPECT_TRUE(denied.rewritten);
  EXPECT_EQ(denied.ttl_us, hour - 100'000);  // the state matters until the hour's end
  EXPECT_EQ(key.drain(fixed(10, hour), t0 + 2'200'000), 0);
}

TEST(FixedWindowCarry, AShorterPeriodCountsTheStoredWindowInTheOneNow) {
  FixedWindowKey key;
  EXPECT_EQ(key.drain(fixed(10, hour), t0 + 5 * minute), 10);
  EXPECT_EQ(key.drain(fixed(10, minute), t0 + 20 * minute), 0);
  EXPECT_EQ(key.drain(fixed(10, minute), t0 + 21 * minute), 10);  // the next minute is new
}

TEST(FixedWindowCarry, AnAnchoredWindowShrunkCarriesItsCountIntoAWindowStartingNow) {
  FixedWindowKey key;
  EXPECT_EQ(key.drain(fixed(10, hour, true), t0), 10);
  EXPECT_EQ(key.drain(fixed(10, minute, true), t0 + 20 * minute), 0);
  EXPECT_EQ(key.drain(fixed(10, minute, true), t0 + 21 * minute), 10);
}

TEST(FixedWindowCarry, AnAlignedWindowBecomingAnchoredKeepsItsStartAndCount) {
  FixedWindowKey key;
  EXPECT_EQ(key.drain(fixed(10, minute), t0 + 10 * second), 10);
  EXPECT_EQ(key.drain(fixed(10, minute, true), t0 + 50 * second), 0);
  EXPECT_EQ(key.state()->start_us, t0);
  EXPECT_EQ(key.drain(fixed(10, minute, true), t0 + minute), 10);
}

TEST(FixedWindowCarry, AStoredWindowThatEndedCarriesNothing) {
  FixedWindowKey key;
  EXPECT_EQ(key.drain(fixed(10, minute), t0), 10);
  EXPECT_EQ(key.drain(fixed(5, minute), t0 + 2 * minute), 5);
}

TEST(FixedWindowCarry, AsIsKeepsTheCountProportionalScalesItResetZeroesIt) {
  for (const auto& [how, expected] :
       {std::pair{Carry::as_is, 12}, std::pair{Carry::proportional, 4},
        std::pair{Carry::reset, 20}}) {
    FixedWindowKey key;
    EXPECT_TRUE(key.acquire(fixed(10, hour), t0, 8).allowed);
    // 8 of 10 become 16 of 20 (proportional), or nothing (reset: set_policy() sends its time).
    EXPECT_EQ(key.drain(fixed(20, hour), t0 + second, carry(how, t0 + second)), expected);
  }
}

TEST(FixedWindowCarry, ProportionalRoundsUp) {
  FixedWindowKey key;
  EXPECT_TRUE(key.acquire(fixed(10, hour), t0, 1).allowed);
  EXPECT_EQ(key.drain(fixed(3, hour), t0 + second, carry(Carry::proportional)), 2);  // 0.3 -> 1
}

TEST(FixedWindowCarry, ConversionHappensOnceThenTheStampMatches) {
  FixedWindowKey key;
  EXPECT_TRUE(key.acquire(fixed(10, hour), t0, 8).allowed);
  EXPECT_TRUE(key.acquire(fixed(20, hour), t0 + 1, 1, carry(Carry::proportional)).rewritten);
  EXPECT_EQ(key.state()->count, 17);
  EXPECT_EQ(key.state()->stamp, (Stamp{20, hour, 0, 0}));
  const LimitOutcome again = key.acquire(fixed(20, hour), t0 + 2, 1, carry(Carry::proportional));
  EXPECT_FALSE(again.rewritten);
  EXPECT_EQ(key.state()->count, 18);
}

TEST(FixedWindowCarry, AnOldFormatValueIsReadAsTodayAndRewrittenWithAStamp) {
  FixedWindowKey key;
  key.state() = FixedWindowState{t0, 10, std::nullopt};
  const LimitOutcome denied = key.acquire(fixed(10, minute), t0 + second);
  EXPECT_FALSE(denied.allowed);
  EXPECT_TRUE(denied.rewritten);
  EXPECT_EQ(key.state()->stamp, (Stamp{10, minute, 0, 0}));
}

TEST(FixedWindowCarry, ANewerPolicyVersionRefusesTheRequestAndIsNotWritten) {
  FixedWindowKey key;
  EXPECT_TRUE(key.acquire(fixed(10, hour), t0, 3, carry(Carry::as_is, 0, 7)).allowed);
  const LimitOutcome stale = key.acquire(fixed(10, hour), t0 + 1, 1, carry(Carry::as_is, 0, 6));
  EXPECT_FALSE(stale.allowed);
  EXPECT_EQ(stale.stale_version, 7);
  EXPECT_EQ(key.state()->count, 3);
  // A limiter that follows no store (version 0) is never refused.
  EXPECT_TRUE(key.acquire(fixed(10, hour), t0 + 2).allowed);
}

TEST(FixedWindowCarry, PeekConvertsButNeverWrites) {
  FixedWindowKey key;
  EXPECT_EQ(key.drain(fixed(10, hour), t0), 10);
  const LimitOutcome peeked = key.peek(fixed(20, hour), t0 + 1, carry(Carry::proportional));
  EXPECT_TRUE(peeked.rewritten);
  EXPECT_EQ(peeked.remaining, 0);  // 10 of 10 are 20 of 20
  EXPECT_EQ(key.state()->stamp, (Stamp{10, hour, 0, 0}));
}

// ---- sliding_window_counter

TEST(SlidingWindowCounterCarry, ADenialAfterALongerPeriodKeepsTheStateForTheNewWindow) {
  CounterKey key;
  EXPECT_EQ(key.drain({10, second}, t0), 10);
  const LimitOutcome denied = key.acquire({10, hour}, t0 + 100'000);
  EXPECT_FALSE(denied.allowed);
  EXPECT_TRUE(denied.rewritten);
  EXPECT_EQ(denied.ttl_us, 2 * hour - 100'000);
  EXPECT_EQ(key.drain({10, hour}, t0 + 2'200'000), 0);
}

TEST(SlidingWindowCounterCarry, AShorterPeriodCountsTheStoredWindowInTheOneNow) {
  CounterKey key;
  EXPECT_EQ(key.drain({10, hour}, t0 + 5 * minute), 10);
  EXPECT_EQ(key.drain({10, minute}, t0 + 20 * minute), 0);
}

TEST(SlidingWindowCounterCarry, ALongerPeriodCountsTheStoredWindowsAsTheCurrentOne) {
  CounterKey key;
  EXPECT_TRUE(key.acquire({5, minute}, t0 + 9 * minute, 3).allowed);
  EXPECT_EQ(key.drain({5, minute}, t0 + 10 * minute + second), 2);  // 3 weighted ~98%
  // Minutes 9 and 10 both lie in the hour now current: 3 + 2 of 12 are used.
  EXPECT_EQ(key.drain({12, hour}, t0 + 10 * minute + 2 * second), 7);
}

TEST(SlidingWindowCounterCarry, StoredWindowsLandInTheNewestNewWindowTheyOverlap) {
  CounterKey key;
  key.state() = SlidingWindowCounterState{t0 + minute, 4, 6, Stamp{10, minute, 0, 0}};
  // Period 2 min from t0 + 2 min: the stored current [1, 2) and previous [0, 1) minutes both
  // land in the previous new window [0, 2), which is half past at t0 + 3 min.
  EXPECT_EQ(key.drain({10, 2 * minute}, t0 + 3 * minute), 5);  // 10 - (10 - floor(10 * 1/2))
}

TEST(SlidingWindowCounterCarry, AsIsKeepsTheCountsProportionalScalesThemResetZeroesThem) {
  for (const auto& [how, expected] :
       {std::pair{Carry::as_is, 12}, std::pair{Carry::proportional, 4},
        std::pair{Carry::reset, 20}}) {
    CounterKey key;
    EXPECT_TRUE(key.acquire({10, hour}, t0, 8).allowed);
    EXPECT_EQ(key.drain({20, hour}, t0 + second, carry(how, t0 + second)), expected);
  }
}

TEST(SlidingWindowCounterCarry, ANewerPolicyVersionRefusesTheRequest) {
  CounterKey key;
  EXPECT_TRUE(key.acquire({10, hour}, t0, 1, carry(Carry::as_is, 0, 3)).allowed);
  EXPECT_EQ(key.acquire({10, hour}, t0, 1, carry(Carry::as_is, 0, 2)).stale_version, 3);
  EXPECT_EQ(key.state()->current, 1);
}

// ---- sliding_window_log

TEST(SlidingWindowLogCarry, ADenialAfterALongerWindowKeepsTheStateForTheNewWindow) {
  LogKey key;
  EXPECT_EQ(key.drain({10, second}, t0), 10);
  const LimitOutcome denied = key.acquire({10, hour}, t0 + 100'000);
  EXPECT_FALSE(denied.allowed);
  EXPECT_TRUE(denied.rewritten);
  EXPECT_EQ(denied.ttl_us, hour - 100'000);
  EXPECT_EQ(key.drain({10, hour}, t0 + 2'200'000), 0);
}

TEST(SlidingWindowLogCarry, AShorterWindowAppliesToTheStoredTimes) {
  LogKey key;
  EXPECT_TRUE(key.acquire({10, hour}, t0, 6).allowed);
  EXPECT_TRUE(key.acquire({10, hour}, t0 + 30 * minute, 4).allowed);
  // A 40-minute window at t0 + 50 min holds the 4 admitted at t0 + 30 min only.
  EXPECT_EQ(key.drain({5, 40 * minute}, t0 + 50 * minute), 1);
}

TEST(SlidingWindowLogCarry, ResetDropsThePermitsAdmittedBeforeTheChange) {
  LogKey key;
  EXPECT_TRUE(key.acquire({10, hour}, t0, 4).allowed);
  EXPECT_TRUE(key.acquire({10, hour}, t0 + 2 * second, 2).allowed);
  // Changed at t0 + 1 s, first seen at t0 + 3 s: the 2 admitted after the change still count.
  EXPECT_EQ(key.drain({5, hour}, t0 + 3 * second, carry(Carry::reset, t0 + second)), 3);
  EXPECT_EQ(key.state()->times.size(), 5U);
}

TEST(SlidingWindowLogCarry, AsIsAndProportionalKeepEveryTime) {
  for (const Carry how : {Carry::as_is, Carry::proportional}) {
    LogKey key;
    EXPECT_TRUE(key.acquire({10, hour}, t0, 4).allowed);
    EXPECT_EQ(key.drain({5, hour}, t0 + second, carry(how)), 1);
  }
}

TEST(SlidingWindowLogCarry, ANewerPolicyVersionRefusesTheRequest) {
  LogKey key;
  EXPECT_TRUE(key.acquire({10, hour}, t0, 1, carry(Carry::as_is, 0, 3)).allowed);
  EXPECT_EQ(key.acquire({10, hour}, t0, 1, carry(Carry::as_is, 0, 2)).stale_version, 3);
  EXPECT_EQ(key.state()->times.size(), 1U);
}

}  // namespace
}  // namespace redlimit::detail
