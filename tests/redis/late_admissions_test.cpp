// AcquireOptions::max_lateness against a real primary with one replica (ClientOptions::replicas
// = 1): an admission answered later than max_lateness after the time Redis admitted it for is
// not used. The failure policy answers instead; the permits stay taken, or go back while their
// slot is ahead.
//
// Late is made without timing: the replica is stopped (SIGSTOP) when the call goes, the script
// runs on the primary (its call is counted there), and the call stays unanswered (the WAIT that
// follows it is held) until the replica runs again 100 ms later. Such an answer is late by at
// least 100 ms whatever the machine's load; the limits compared with it are 20 ms (late) and
// 10 min (in time). Nothing here asserts how long anything took.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/metrics.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/task_group.hpp"
#include "support/answer.hpp"
#include "support/loop_test.hpp"
#include "support/replicated_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

using test::Answer;
using test::answer_of;

/// Starts `call` with the replica stopped; once its script has run on the primary, keeps the
/// replica stopped 100 ms more (the answer, held by the WAIT, is at least that late), checks
/// that nothing was answered meanwhile, and lets the replica run again.
Task<void> answered_late(uv_loop_t* loop, test::ReplicatedServer& servers, Task<Decision> call,
                         Answer* answer) {
  const long long calls_before = servers.primary().script_calls();
  servers.replica().pause();
  TaskGroup calls;
  calls.add(answer_of(std::move(call), answer));
  while (servers.primary().script_calls() == calls_before)
    co_await sleep_for(loop, 2ms);
  co_await sleep_for(loop, 100ms);
  EXPECT_FALSE(answer->done) << "answered while the replica was stopped";
  servers.replica().resume();
  co_await calls.join();
}

class LateAdmissionsTest : public test::LoopTest {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    LoopTest::TearDown();
  }
  /// redlimit_late_admissions_total of the limiter `name`.
  std::uint64_t late_admissions(const std::string& name = "sms") const {
    for (const LimiterStats& stats : client_.metrics()->snapshot().limiters)
      if (stats.name == name) return stats.late_admissions;
    return 0;
  }
  Decision late(Task<Decision> call) {
    Answer answer;
    run(loop(), answered_late(loop(), servers_, std::move(call), &answer));
    EXPECT_TRUE(answer.done);
    return answer.decision;
  }

  test::ReplicatedServer servers_;
  Client client_{loop(), servers_.holding_client_options()};
  /// Why 1/min: the state outlives the checks, and a slot reserved is a minute ahead.
  Limiter limiter_{client_, Policy{Limit::gcra("1/min", 1)}, LimiterOptions{.name = "sms"}};
};

TEST_F(LateAdmissionsTest, AnAdmissionAnsweredPastMaxLatenessIsNotUsedAndStaysTaken) {
  const Decision decision = late(limiter_.acquire("k", 1, {.max_lateness = 20ms}));
  EXPECT_FALSE(decision.allowed);
  EXPECT_EQ(decision.source, Source::fail_closed);
  EXPECT_EQ(late_admissions(), 1u);
  // Under-admission, never over: the permit Redis admitted is gone.
  const Decision after = run(loop(), limiter_.try_acquire("k"));
  EXPECT_FALSE(after.allowed);
  EXPECT_EQ(after.source, Source::redis);
}

TEST_F(LateAdmissionsTest, AWindowPolicysAdmissionAnsweredPastMaxLatenessIsNotUsed) {
  // A policy that cannot be reserved on is asked again at each retry_after, within max_wait:
  // the late admission is not used, and the next answer is Redis's denial (the permit is gone).
  Limiter window(client_, Policy{Limit::sliding_window_log("1/min")},
                 LimiterOptions{.name = "window"});
  const Decision decision = late(window.acquire("k", 1, {.max_wait = 30s, .max_lateness = 20ms}));
  EXPECT_FALSE(decision.allowed);
  EXPECT_EQ(decision.source, Source::redis);
  EXPECT_EQ(late_admissions("window"), 1u);
}

TEST_F(LateAdmissionsTest, AnAdmissionAnsweredWithinMaxLatenessIsUsed) {
  const Decision decision = late(limiter_.acquire("k", 1, {.max_lateness = 10min}));
  EXPECT_TRUE(decision.allowed);
  EXPECT_EQ(decision.source, Source::redis);
  EXPECT_EQ(late_admissions(), 0u);
}

TEST_F(LateAdmissionsTest, WithoutMaxLatenessALateAdmissionIsUsed) {
  const Decision decision = late(limiter_.acquire("k"));
  EXPECT_TRUE(decision.allowed);
  EXPECT_EQ(decision.source, Source::redis);
}

TEST_F(LateAdmissionsTest, AReservationAnsweredLateIsGivenBackWhileItsSlotIsAhead) {
  ASSERT_TRUE(run(loop(), limiter_.try_acquire("k")).allowed);
  // The next permit is a minute ahead: reserved, then answered late, long before its slot.
  const Decision decision =
      late(limiter_.acquire("k", 1, {.max_wait = 5min, .max_lateness = 20ms}));
  EXPECT_FALSE(decision.allowed);
  EXPECT_EQ(decision.source, Source::fail_closed);
  // Given back: the next permit is still within the minute, not two minutes ahead.
  const Decision after = run(loop(), limiter_.try_acquire("k"));
  EXPECT_FALSE(after.allowed);
  EXPECT_EQ(after.source, Source::redis);
  EXPECT_LE(after.retry_after, 60s);
}

TEST_F(LateAdmissionsTest, AnAdmissionOfSeveralClaimsAnsweredLateIsNotUsed) {
  std::vector<Claim> claims{{&limiter_, "a"}, {&limiter_, "b"}};
  const Decision decision = late(acquire_all(std::move(claims), {.max_lateness = 20ms}));
  EXPECT_FALSE(decision.allowed);
  EXPECT_EQ(decision.source, Source::fail_closed);
  EXPECT_EQ(late_admissions(), 2u) << "one per claim";
}

TEST_F(LateAdmissionsTest, AReservationOfSeveralClaimsAnsweredLateIsGivenBack) {
  std::vector<Claim> first{{&limiter_, "a"}, {&limiter_, "b"}};
  ASSERT_TRUE(run(loop(), try_acquire_all(std::move(first))).allowed);
  std::vector<Claim> claims{{&limiter_, "a"}, {&limiter_, "b"}};
  const Decision decision =
      late(acquire_all(std::move(claims), {.max_wait = 5min, .max_lateness = 20ms}));
  EXPECT_FALSE(decision.allowed);
  EXPECT_EQ(decision.source, Source::fail_closed);
  for (const char* key : {"a", "b"}) {
    const Decision after = run(loop(), limiter_.try_acquire(key));
    EXPECT_FALSE(after.allowed) << key;
    EXPECT_LE(after.retry_after, 60s) << key;
  }
}

TEST_F(LateAdmissionsTest, AMaxLatenessThatIsNotPositiveIsRefusedBeforeAnyCall) {
  const long long calls_before = servers_.primary().script_calls();
  for (const std::chrono::microseconds bad : {0us, -1us}) {
    EXPECT_THROW(run(loop(), limiter_.acquire("k", 1, {.max_lateness = bad})), InvalidArgument);
    std::vector<Claim> claims{{&limiter_, "a"}};
    EXPECT_THROW(run(loop(), acquire_all(std::move(claims), {.max_lateness = bad})),
                 InvalidArgument);
  }
  EXPECT_EQ(servers_.primary().script_calls(), calls_before);
}

}  // namespace
}  // namespace redlimit
