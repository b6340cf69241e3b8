// The deadline list of a connection: commands ordered by deadline, and the timer that fires
// when the earliest one passes.
#include "redis/deadline_list.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "support/loop_test.hpp"

namespace redlimit::detail {
namespace {

using namespace std::chrono_literals;
using Clock = DeadlineList::Clock;

class DeadlineListTest : public test::LoopTest {
 protected:
  ~DeadlineListTest() override = default;
  void TearDown() override {
    list_.close();
    uv_run(loop(), UV_RUN_DEFAULT);
    LoopTest::TearDown();
  }
  /// Takes every op due at `now` out of the list, earliest first.
  std::vector<CommandOp*> take_expired(Clock::time_point now) {
    std::vector<CommandOp*> expired;
    while (CommandOp* op = list_.expired(now)) {
      list_.erase(op);
      expired.push_back(op);
    }
    return expired;
  }
  static void on_due(void* self) { ++static_cast<DeadlineListTest*>(self)->fired_; }

  CloseLatch latch_;
  DeadlineList list_{loop(), &on_due, this, &latch_};
  int fired_ = 0;
  const Clock::time_point start_ = Clock::now();
};

TEST_F(DeadlineListTest, CommandsExpireInDeadlineOrderWhateverTheOrderTheyCameIn) {
  CommandOp late, early, middle, same_as_middle;
  late.deadline = start_ + 30s;
  early.deadline = start_ + 10s;
  middle.deadline = start_ + 20s;
  same_as_middle.deadline = start_ + 20s;
  for (CommandOp* op : {&late, &early, &middle, &same_as_middle})
    list_.insert(op);
  EXPECT_EQ(list_.expired(start_), nullptr);
  EXPECT_EQ(take_expired(start_ + 20s),
            (std::vector<CommandOp*>{&early, &middle, &same_as_middle}));
  EXPECT_EQ(take_expired(start_ + 1h), (std::vector<CommandOp*>{&late}));
}

TEST_F(DeadlineListTest, AnErasedCommandNeverExpires) {
  CommandOp first, second, third;
  first.deadline = start_ + 1s;
  second.deadline = start_ + 2s;
  third.deadline = start_ + 3s;
  for (CommandOp* op : {&first, &second, &third})
    list_.insert(op);
  list_.erase(&second);
  list_.erase(&second);  // a second erase is a no-op
  EXPECT_EQ(take_expired(start_ + 1h), (std::vector<CommandOp*>{&first, &third}));
}

// The timer counts whole milliseconds of the loop's clock, so it may fire a fraction of a
// millisecond early; the owner then arms it again, as a connection does.
TEST_F(DeadlineListTest, TheTimerFiresUntilTheEarliestDeadlineHasPassed) {
  CommandOp op;
  op.deadline = Clock::now() + 5ms;
  list_.insert(&op);
  while (list_.expired(Clock::now()) == nullptr) {
    list_.arm();
    uv_run(loop(), UV_RUN_ONCE);
  }
  EXPECT_GE(fired_, 1);
  EXPECT_GE(Clock::now(), op.deadline);
  list_.erase(&op);
}

TEST_F(DeadlineListTest, OrphaningTellsEveryCommandItsConnectionIsGone) {
  CommandOp first, second;
  first.connection = second.connection = reinterpret_cast<Connection*>(this);
  first.deadline = second.deadline = start_ + 1s;
  list_.insert(&first);
  list_.insert(&second);
  list_.orphan_all();
  EXPECT_EQ(first.connection, nullptr);
  EXPECT_EQ(second.connection, nullptr);
  take_expired(start_ + 1h);
}

}  // namespace
}  // namespace redlimit::detail
