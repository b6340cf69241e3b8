// The reservation and cancellation models as specifications (the differential test shows the
// reserve script decides exactly as they do).
#include "algorithms/reservations.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "policy/compiled_policy.hpp"

namespace redlimit::detail {
namespace {

using namespace std::chrono_literals;

constexpr std::int64_t t0 = 1'800'000'000'000'000;  // a microsecond timestamp in 2027
constexpr std::int64_t interval = 50'000;           // 20 per second

/// One key of `gcra 20/s burst 1`, driven with explicit times (microseconds).
class Queue {
 public:
  Queue()
      : policy_(CompiledPolicy::compile(Policy::of({Algorithm::gcra, {20, 1s}, 1}))),
        spec_(policy_->specs().front()) {}

  ReserveOutcome reserve(std::int64_t now, std::int64_t max_wait = 10'000'000) {
    return detail::reserve(spec_, state_, now, 1, max_wait);
  }
  CancelOutcome cancel(std::int64_t now, const CancelTicket& ticket) {
    return cancel_reservation(spec_, state_, now, 1, ticket);
  }
  /// What a client sends to cancel `reservation`: it as reserved, whatever notices it heard.
  CancelTicket ticket(const ReserveOutcome& reservation) const {
    return {.slot = reservation.slot,
            .den = spec_.a,
            .d = spec_.b,
            .version = reservation.book.version,
            .epoch = reservation.book.epoch,
            .cancels_before = reservation.book.cancels};
  }
  void reset() { state_.reset(); }

 private:
  std::shared_ptr<const CompiledPolicy> policy_;
  LimitSpec spec_;
  std::optional<LimitState> state_;
};

TEST(Reservations, EachWaitsOneIntervalBehindThePreviousInReservationOrder) {
  Queue queue;
  for (std::int64_t i = 0; i < 5; ++i) {
    const ReserveOutcome r = queue.reserve(t0);
    ASSERT_TRUE(r.decision.allowed);
    EXPECT_EQ(r.wait_us, i * interval);
    EXPECT_EQ(r.slot, (FracTime{t0 + i * interval, 0}));
    EXPECT_EQ(r.book.version, i + 1);
    EXPECT_EQ(r.book.epoch, t0) << "the epoch is the time of the key's first reservation";
  }
}

TEST(Reservations, AWaitBeyondMaxWaitReservesNothing) {
  Queue queue;
  queue.reserve(t0);
  const ReserveOutcome refused = queue.reserve(t0, interval - 1);
  EXPECT_FALSE(refused.decision.allowed);
  EXPECT_EQ(refused.decision.retry_after_us, interval);
  EXPECT_EQ(queue.reserve(t0).wait_us, interval) << "the refused one took no slot";
}

TEST(Reservations, AnyWaitIsAcceptedUpToASlotIn2112WhereTimesStayExact) {
  Queue queue;
  const std::int64_t unbounded = max_exact;  // acquire()'s default max_wait, as sent
  ASSERT_TRUE(queue.reserve(t0, unbounded).decision.allowed);
  const ReserveOutcome behind = queue.reserve(t0, unbounded);
  EXPECT_TRUE(behind.decision.allowed);
  EXPECT_EQ(behind.wait_us, interval);
  // At 2^52 - 60 ms, the slot 100 ms ahead would lie past 2^52 us: refused, whatever max_wait.
  Queue late;
  const std::int64_t near_the_end = max_exact - 60'000;
  ASSERT_TRUE(late.reserve(near_the_end, unbounded).decision.allowed);
  ASSERT_TRUE(late.reserve(near_the_end, unbounded).decision.allowed);  // slot at 2^52 - 10 ms
  const ReserveOutcome past = late.reserve(near_the_end, unbounded);
  EXPECT_FALSE(past.decision.allowed);
  EXPECT_GT(past.decision.retry_after_us, longest_reservation_wait_us(near_the_end))
      << "acquire() turns this into InvalidArgument, not a denial";
}

TEST(Reservations, CancellingAPendingSlotGivesItBackAndAnnouncesTheShift) {
  Queue queue;
  queue.reserve(t0);
  const ReserveOutcome second = queue.reserve(t0);
  const CancelOutcome cancel = queue.cancel(t0 + 10, queue.ticket(second));
  EXPECT_EQ(cancel.verdict, CancelVerdict::returned);
  EXPECT_EQ(cancel.shift, (FracTime{interval, 0}));
  EXPECT_EQ(cancel.book.cancels, 1);
  EXPECT_EQ(queue.reserve(t0 + 10).wait_us, interval - 10) << "the freed slot is taken again";
}

TEST(Reservations, CancellingASlotThatHasComeLeavesThePermitsWithTheCaller) {
  Queue queue;
  queue.reserve(t0);
  const ReserveOutcome second = queue.reserve(t0);
  EXPECT_EQ(queue.cancel(t0 + interval, queue.ticket(second)).verdict, CancelVerdict::due);
  EXPECT_EQ(queue.reserve(t0 + interval).wait_us, interval) << "nothing was given back";
}

// Waiters 1..3 cancel at once, each before hearing of the others: the key's log of
// cancellations, not the waiters' copies of their slots, says where each slot is now.
TEST(Reservations, WaitersCancellingAtOnceAllGiveBackSlotsStillAhead) {
  Queue queue;
  queue.reserve(t0);
  const ReserveOutcome first = queue.reserve(t0);   // slot t0 + 50 ms
  const ReserveOutcome second = queue.reserve(t0);  // slot t0 + 100 ms
  const ReserveOutcome third = queue.reserve(t0);   // slot t0 + 150 ms
  const std::int64_t now = t0 + 30'000;
  EXPECT_EQ(queue.cancel(now, queue.ticket(second)).verdict, CancelVerdict::returned);
  EXPECT_EQ(queue.cancel(now, queue.ticket(first)).verdict, CancelVerdict::returned);
  EXPECT_EQ(queue.cancel(now, queue.ticket(third)).verdict, CancelVerdict::returned);
  EXPECT_EQ(queue.reserve(now).wait_us, interval - 30'000) << "all three slots went back";
}

TEST(Reservations, ASlotMovedIntoThePastByCancellationsAheadIsDue) {
  Queue queue;
  queue.reserve(t0);
  const ReserveOutcome first = queue.reserve(t0);   // slot t0 + 50 ms
  const ReserveOutcome second = queue.reserve(t0);  // slot t0 + 100 ms
  EXPECT_EQ(queue.cancel(t0 + 10'000, queue.ticket(first)).verdict, CancelVerdict::returned);
  // The second moved to 50 ms: at 60 ms it has come, although it was reserved at 100 ms (a
  // client that missed the notice still thinks so). Its permits are used, not given back.
  EXPECT_EQ(queue.cancel(t0 + 60'000, queue.ticket(second)).verdict, CancelVerdict::due);
}

TEST(Reservations, ACancellationBehindASlotDoesNotMoveIt) {
  Queue queue;
  queue.reserve(t0);
  const ReserveOutcome first = queue.reserve(t0);   // slot t0 + 50 ms
  const ReserveOutcome second = queue.reserve(t0);  // slot t0 + 100 ms
  EXPECT_EQ(queue.cancel(t0 + 10'000, queue.ticket(second)).verdict, CancelVerdict::returned);
  EXPECT_EQ(queue.cancel(t0 + 40'000, queue.ticket(first)).verdict, CancelVerdict::returned)
      << "still at 50 ms";
}

TEST(Reservations, ACancellationBeforeAReservationDoesNotMoveIt) {
  Queue queue;
  queue.reserve(t0);
  const ReserveOutcome first = queue.reserve(t0);  // slot t0 + 50 ms
  EXPECT_EQ(queue.cancel(t0 + 10'000, queue.ticket(first)).verdict, CancelVerdict::returned);
  const ReserveOutcome later = queue.reserve(t0 + 10'000);  // slot t0 + 50 ms again
  EXPECT_EQ(later.slot, (FracTime{t0 + interval, 0}));
  EXPECT_EQ(queue.cancel(t0 + 40'000, queue.ticket(later)).verdict, CancelVerdict::returned);
}

TEST(Reservations, AKeyResetSinceTheReservationRefusesItsCancel) {
  Queue queue;
  queue.reserve(t0);
  const ReserveOutcome old = queue.reserve(t0);
  queue.reset();
  queue.reserve(t0 + 1);
  const ReserveOutcome current = queue.reserve(t0 + 1);
  EXPECT_NE(current.book.epoch, old.book.epoch);
  EXPECT_EQ(queue.cancel(t0 + 2, queue.ticket(old)).verdict, CancelVerdict::refused);
  EXPECT_EQ(queue.cancel(t0 + 2, queue.ticket(current)).verdict, CancelVerdict::returned);
}

TEST(Reservations, TheLogForgetsCancellationsOnceEverySlotBeforeThemHasCome) {
  Queue queue;
  queue.reserve(t0);
  const ReserveOutcome first = queue.reserve(t0);   // slot t0 + 50 ms
  const ReserveOutcome second = queue.reserve(t0);  // slot t0 + 100 ms
  queue.cancel(t0 + 10'000, queue.ticket(first));   // backlog then ended at t0 + 150 ms
  // Long after, the entry is gone; a reservation made before it is due all the same.
  EXPECT_EQ(queue.cancel(t0 + 200'000, queue.ticket(second)).verdict, CancelVerdict::due);
}

/// The shift a cancel tells the waiters behind the second of two reservations of one permit on
/// a `gcra` key reserved under `reserved` ({p, d}: d/p us per permit), cancelled under `in_force`.
CancelOutcome cancel_under(std::pair<std::int64_t, std::int64_t> reserved,
                           std::pair<std::int64_t, std::int64_t> in_force) {
  const LimitSpec before{Algorithm::gcra, reserved.first, reserved.second, 1};
  const LimitSpec after{Algorithm::gcra, in_force.first, in_force.second, 1};
  std::optional<LimitState> state;
  reserve(before, state, t0, 1, 0);
  const ReserveOutcome second = reserve(before, state, t0, 1, 10'000'000);
  const CancelTicket ticket{.slot = second.slot,
                            .den = before.a,
                            .d = before.b,
                            .version = second.book.version,
                            .epoch = second.book.epoch,
                            .cancels_before = second.book.cancels};
  return cancel_reservation(after, state, t0 + 10, 1, ticket);
}

// The key gives back one permit at the rate in force; the waiters move by that or by the
// reservation's own step, the shorter, compared exactly: 333333 4/7 us < 333333 2/3 us.
TEST(Reservations, ACancelMovesTheWaitersByTheShorterOfTheReservedStepAndTheStepInForce) {
  const CancelOutcome loosened = cancel_under({3, 1'000'001}, {7, 2'333'335});
  EXPECT_EQ(loosened.verdict, CancelVerdict::returned);
  EXPECT_EQ(loosened.shift, (FracTime{333'333, 4}));
  EXPECT_EQ(loosened.den, 7) << "the step in force, in its own denominator";

  const CancelOutcome tightened = cancel_under({7, 2'333'335}, {3, 1'000'001});
  EXPECT_EQ(tightened.verdict, CancelVerdict::returned);
  EXPECT_EQ(tightened.shift, (FracTime{333'333, 4}));
  EXPECT_EQ(tightened.den, 7) << "the reservation's own step";

  const CancelOutcome same = cancel_under({3, 1'000'001}, {6, 2'000'002});
  EXPECT_EQ(same.shift, (FracTime{333'333, 2}));
  EXPECT_EQ(same.den, 3) << "equal steps keep the reservation's denominator";
}

/// Keys of one limit each, reserved together at one slot (acquire_all()'s model).
class Keys {
 public:
  explicit Keys(std::vector<Limit> limits) {
    for (const Limit& limit : limits)
      policies_.push_back(CompiledPolicy::compile(Policy::of(limit)));
    states_.resize(policies_.size());
  }
  ReserveAllOutcome reserve_all(std::int64_t now, std::int64_t max_wait,
                                std::int64_t earliest_slot = 0) {
    return reserve_at_one_slot(
        policies_.size(), now,
        [&](std::size_t c, std::int64_t not_before, bool dry) {
          std::optional<LimitState> copy = states_[c];
          return reserve(policies_[c]->specs().front(), dry ? copy : states_[c], now, 1, max_wait,
                         {}, not_before);
        },
        earliest_slot);
  }
  ReserveOutcome reserve_one(std::size_t key, std::int64_t now) {
    return reserve(policies_[key]->specs().front(), states_[key], now, 1, 10'000'000);
  }
  const std::optional<LimitState>& state(std::size_t key) const { return states_[key]; }

 private:
  std::vector<std::shared_ptr<const CompiledPolicy>> policies_;
  std::vector<std::optional<LimitState>> states_;
};

TEST(ReserveAtOneSlot, EveryKeyTakesItsPermitsAtTheLatestOfTheirEarliestSlots) {
  // Key 1 (20/s, burst 1) is taken at t0: its next slot is t0 + 50 ms; key 0 is idle.
  Keys keys({{Algorithm::gcra, {100, 1s}, 10}, {Algorithm::gcra, {20, 1s}, 1}});
  ASSERT_TRUE(keys.reserve_one(1, t0).decision.allowed);
  const ReserveAllOutcome both = keys.reserve_all(t0, 1'000'000);
  ASSERT_TRUE(both.decision.allowed);
  EXPECT_EQ(both.binding, 1u) << "the busy key set the slot";
  EXPECT_EQ(both.wait_us, interval);
  EXPECT_EQ(both.slot_us, t0 + interval);
  for (const ReserveOutcome& part : both.claims)
    EXPECT_EQ(part.slot, (FracTime{t0 + interval, 0}));
  // The idle key's permit arrives at the slot: its TAT moves on from there (10 ms a permit).
  EXPECT_EQ(std::get<GcraState>(*keys.state(0)).tat, (FracTime{t0 + interval + 10'000, 0}));
  // A request on the busy key after it queues behind it.
  EXPECT_EQ(keys.reserve_one(1, t0 + 1).slot, (FracTime{t0 + 2 * interval, 0}));
}

TEST(ReserveAtOneSlot, ADenialOnOneKeyWritesNothingOnAny) {
  Keys keys({{Algorithm::gcra, {100, 1s}, 10}, {Algorithm::gcra, {20, 1s}, 1}});
  ASSERT_TRUE(keys.reserve_one(1, t0).decision.allowed);
  const std::optional<LimitState> idle = keys.state(0);
  const ReserveAllOutcome denied = keys.reserve_all(t0, interval - 1);
  EXPECT_FALSE(denied.decision.allowed);
  EXPECT_EQ(denied.binding, 1u);
  EXPECT_EQ(denied.decision.retry_after_us, interval);
  EXPECT_TRUE(denied.claims.empty());
  EXPECT_EQ(keys.state(0).has_value(), idle.has_value()) << "the idle key was not written";
}

TEST(ReserveAtOneSlot, AnEarliestSlotFromAnotherHashSlotHoldsEveryKeyToIt) {
  Keys keys({{Algorithm::token_bucket, {100, 1s}, 10}, {Algorithm::leaky_bucket, {20, 1s}, 4}});
  const ReserveAllOutcome later = keys.reserve_all(t0, 1'000'000, t0 + 200'000);
  ASSERT_TRUE(later.decision.allowed);
  EXPECT_EQ(later.wait_us, 200'000);
  EXPECT_EQ(later.slot_us, t0 + 200'000);
  // Beyond max_wait, the earliest slot denies, with the wait until it.
  const ReserveAllOutcome beyond = keys.reserve_all(t0, 100'000, t0 + 300'000);
  EXPECT_FALSE(beyond.decision.allowed);
  EXPECT_GE(beyond.decision.retry_after_us, 300'000);
}

TEST(ReserveAtOneSlot, ALeakyQueueFullNowDeniesAsAcquireDoes) {
  // A leaky bucket queues at most its burst: with its queue of 1 full, nothing is reserved.
  Keys keys({{Algorithm::gcra, {20, 1s}, 1}, {Algorithm::leaky_bucket, {20, 1s}, 1}});
  ASSERT_TRUE(keys.reserve_one(1, t0).decision.allowed);
  const ReserveAllOutcome denied = keys.reserve_all(t0, 1'000'000);
  EXPECT_FALSE(denied.decision.allowed);
  EXPECT_EQ(denied.binding, 1u);
  EXPECT_FALSE(keys.state(0).has_value()) << "the gcra key was not written";
  // Once it drains, later arrivals at the slot queue behind a departure then.
  Keys busy({{Algorithm::gcra, {5, 1s}, 1}, {Algorithm::leaky_bucket, {20, 1s}, 1}});
  ASSERT_TRUE(busy.reserve_one(0, t0).decision.allowed);
  const ReserveAllOutcome both = busy.reserve_all(t0, 1'000'000);
  ASSERT_TRUE(both.decision.allowed);
  EXPECT_EQ(both.slot_us, t0 + 200'000) << "the gcra key's next slot";
  EXPECT_FALSE(busy.reserve_one(1, t0 + 1).decision.allowed)
      << "the leaky queue holds acquire_all's permit, counted from its slot";
}

}  // namespace
}  // namespace redlimit::detail
