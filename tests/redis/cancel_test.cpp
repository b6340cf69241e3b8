// Cancelling a reservation: the same ticket cancelled twice gives its permits back once (issue 15,
// part 6), against Redis and in process (the same rules in both).
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <memory>
#include <string>

#include "limiter/local_backend.hpp"
#include "limiter/redis_backend.hpp"
#include "lua_scripts.hpp"
#include "redlimit/client.hpp"
#include "redlimit/runtime.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

constexpr std::string_view key_base = "{twice}";

/// A backend on a private redis-server (parameter true) or in process (false).
class Cancel : public test::LoopTest, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) {
      backend_ = std::make_unique<detail::RedisBackend>(client_.dispatcher());
    } else {
      backend_ = std::make_unique<detail::LocalBackend>();
    }
  }
  void TearDown() override {
    backend_.reset();
    run(loop(), client_.close());
    EXPECT_TRUE(server_.keys_without_ttl().empty()) << "a key without TTL was left";
    LoopTest::TearDown();
  }
  detail::DecideRequest request(std::int64_t n, std::int64_t now_us) const {
    return detail::DecideRequest(policy_, detail::KeyBase(std::string(key_base)),
                                 detail::Operation::acquire, n, now_us);
  }
  detail::Reservation reserve(std::int64_t n, std::int64_t now_us, std::int64_t max_wait_us) {
    return run(loop(), backend_->reserve(request(n, now_us), max_wait_us));
  }
  detail::CancelVerdict cancel(std::int64_t n, const detail::Reservation& reservation,
                               std::int64_t now_us) {
    return run(loop(),
               backend_->run_reservation(detail::ReservationOperation::cancel, request(n, now_us),
                                         detail::ticket_of(reservation)))
        .verdict;
  }
  /// A fresh key of `algorithm` at 4/min, burst 4, its capacity taken at `now` (a leaky
  /// bucket's queue of 4 takes 1 now and 2 behind it): what comes next waits. True if taken.
  bool take_capacity(Algorithm algorithm, std::int64_t now) {
    policy_ = detail::CompiledPolicy::compile(
        Policy{Limit{algorithm, Rate::parse("4/min"), 4, Window::aligned}});
    run(loop(), backend_->reset(policy_, std::string(key_base)));
    const std::int64_t taken = algorithm == Algorithm::leaky_bucket ? 1 : 4;
    return reserve(taken, now, 0).decision.allowed;
  }
  test::RedisServer server_;
  Client client_{loop(), ClientOptions{.url = server_.url()}};
  std::unique_ptr<detail::Backend> backend_;
  std::shared_ptr<const detail::CompiledPolicy> policy_;
};

std::string where(const ::testing::TestParamInfo<bool>& info) {
  return info.param ? "Redis" : "InProcess";
}

INSTANTIATE_TEST_SUITE_P(Backends, Cancel, ::testing::Bool(), where);

// Bug (issue 15, 6): the second cancel of a ticket gave its permits back again, so the key held
// one permit more than its capacity allows.
TEST_P(Cancel, TheSameTicketCancelledTwiceGivesItsPermitsBackOnce) {
  const std::int64_t now = 1'800'000'000'000'000;
  for (const Algorithm algorithm :
       {Algorithm::gcra, Algorithm::token_bucket, Algorithm::leaky_bucket}) {
    SCOPED_TRACE(to_string(algorithm));
    ASSERT_TRUE(take_capacity(algorithm, now));
    const detail::Reservation waiting = reserve(1, now + 1, 3'600'000'000);
    ASSERT_TRUE(waiting.decision.allowed);
    ASSERT_GT(waiting.wait_us, 0);
    EXPECT_EQ(cancel(1, waiting, now + 2), detail::CancelVerdict::returned);
    EXPECT_EQ(cancel(1, waiting, now + 3), detail::CancelVerdict::already_returned);
    // One permit went back: the next one waits as the cancelled one did, not less.
    const detail::Reservation next = reserve(1, now + 4, 3'600'000'000);
    ASSERT_TRUE(next.decision.allowed);
    EXPECT_GE(next.wait_us, waiting.wait_us - 3) << "the second cancel gave a permit back again";
    run(loop(), backend_->reset(policy_, std::string(key_base)));
  }
}

// A waiter that may have missed a notice asks where its reservation stands (lua/reserve.lua,
// confirm): Redis, from the key's cancellation log, and the model answer alike.
TEST_P(Cancel, WhereAReservationStandsCountsEveryCancellationAheadOfIt) {
  const std::int64_t now = 1'800'000'000'000'000;
  for (const Algorithm algorithm :
       {Algorithm::gcra, Algorithm::token_bucket, Algorithm::leaky_bucket}) {
    SCOPED_TRACE(to_string(algorithm));
    ASSERT_TRUE(take_capacity(algorithm, now));
    const detail::Reservation first = reserve(1, now + 1, 3'600'000'000);
    const detail::Reservation second = reserve(1, now + 2, 3'600'000'000);
    ASSERT_GT(first.wait_us, 0);
    ASSERT_GT(second.slot.us, first.slot.us);
    const auto where = [&](const detail::Reservation& reservation, std::int64_t at) {
      return run(loop(), backend_->run_reservation(detail::ReservationOperation::confirm,
                                                   request(1, at), detail::ticket_of(reservation)))
          .where;
    };
    detail::StandingOutcome second_at = where(second, now + 3);
    EXPECT_EQ(second_at.standing, detail::ReservationStanding::as_reserved);
    EXPECT_EQ(second_at.slot.us, second.slot.us);

    ASSERT_EQ(cancel(1, first, now + 4), detail::CancelVerdict::returned);
    second_at = where(second, now + 5);
    EXPECT_EQ(second_at.standing, detail::ReservationStanding::moved);
    EXPECT_EQ(second_at.slot.us, first.slot.us) << "one step earlier, into the cancelled slot";
    EXPECT_EQ(second_at.slot.frac, first.slot.frac);
    EXPECT_EQ(where(first, now + 6).standing, detail::ReservationStanding::given_back);

    detail::Reservation of_another_epoch = second;
    of_another_epoch.book.epoch += 1;
    EXPECT_EQ(where(of_another_epoch, now + 7).standing, detail::ReservationStanding::unknown);
    run(loop(), backend_->reset(policy_, std::string(key_base)));
    EXPECT_EQ(where(second, now + 8).standing, detail::ReservationStanding::unknown)
        << "a key reset since no longer knows it";
  }
}

// The script itself, called as a client of another library would: the second EVALSHA of the
// same cancel answers 3 (already returned) and changes nothing.
TEST_P(Cancel, TheScriptAnswersASecondCancelAsAlreadyReturnedAndWritesNothing) {
  if (!GetParam()) GTEST_SKIP() << "the script runs in Redis";
  const std::int64_t now = 1'800'000'000'000'000;
  policy_ = detail::CompiledPolicy::compile(Policy{Limit::gcra("4/min", 4)});
  ASSERT_TRUE(reserve(4, now, 0).decision.allowed);
  const detail::Reservation waiting = reserve(1, now + 1, 3'600'000'000);
  ASSERT_GT(waiting.wait_us, 0);
  const std::string key = std::string(key_base) + policy_->limits().front().key_suffix;
  const auto& limit = policy_->limits().front().fields;
  const auto& epoch = policy_->epoch_fields();
  const auto evalsha = [&](std::int64_t at) {
    return run(loop(), client_.command({"EVALSHA",
                                        std::string(detail::scripts::reserve.sha1),
                                        "4",
                                        key,
                                        key + ":cancels",
                                        key + ":leases",
                                        key + ":held",
                                        "cancel",
                                        "1",
                                        std::to_string(at),
                                        epoch[0],
                                        epoch[1],
                                        epoch[2],
                                        limit[0],
                                        limit[1],
                                        limit[2],
                                        limit[3],
                                        std::to_string(waiting.slot.us),
                                        std::to_string(waiting.slot.frac),
                                        std::to_string(waiting.book.version),
                                        std::to_string(waiting.book.epoch),
                                        std::to_string(waiting.book.cancels),
                                        std::to_string(waiting.den),
                                        std::to_string(waiting.d)}));
  };
  EXPECT_EQ(evalsha(now + 2).as_array()[0].as_integer(), 1);
  const std::string after_first = run(loop(), client_.command({"GET", key})).as_string();
  EXPECT_EQ(evalsha(now + 3).as_array()[0].as_integer(), 3);
  EXPECT_EQ(run(loop(), client_.command({"GET", key})).as_string(), after_first);
  EXPECT_EQ(run(loop(), client_.command({"ZCARD", key + ":cancels"})).as_integer(), 1);
}

}  // namespace
}  // namespace redlimit
