// The cost of giving back a dead process's reservations (lua/reservations/leases.lua): each
// script call on the key reclaims up to a batch of them, and each needs its slot now, moved by
// the cancellations logged after it was made. Those include every reservation reclaimed before
// it, so finding each slot by re-reading the log made one call cost reservations x entries
// (~400 ms in the fault suite: the survivors missed their deadlines). One call must stay short,
// and use only what the least-privilege user of docs/operations.md may run.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "limiter/redis_backend.hpp"
#include "redlimit/client.hpp"
#include "redlimit/runtime.hpp"
#include "support/acl_line.hpp"
#include "support/lateness_probe.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::string_view key_base = "rl:{cost}";
constexpr std::int64_t lease_us = 100'000;
constexpr int dead_reservations = 1000;
constexpr int live_cancels = 300;
/// One reclaiming call, on a shared 2-core machine, with a round trip: the quadratic version
/// took hundreds of milliseconds per call here, a linear one a few.
constexpr auto call_bound = 60ms;

class ReclaimCost : public test::LoopTest {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    LoopTest::TearDown();
  }
  detail::DecideRequest request(std::int64_t now_us) const {
    return detail::DecideRequest(policy_, detail::KeyBase(std::string(key_base)),
                                 detail::Operation::acquire, 1, now_us);
  }
  std::int64_t held_leases() {
    const Reply keys = server_.command({"KEYS", "*:leases"});
    if (keys.as_array().empty()) return 0;
    return server_.command({"ZCARD", keys.as_array().front().as_string()}).as_integer();
  }

  test::RedisServer server_;
  /// The client logs in as the least-privilege user.
  bool user_made_ = server_.command(test::words(test::acl_setuser)).str == "OK";
  Client client_{
      loop(),
      ClientOptions{.url = "redis://redlimit:change-me@127.0.0.1:" + std::to_string(server_.port()),
                    .command_timeout = 10s,
                    .reservation_lease = std::chrono::milliseconds(lease_us / 1000)}};
  detail::RedisBackend backend_{client_.dispatcher()};
  std::shared_ptr<const detail::CompiledPolicy> policy_ = detail::CompiledPolicy::compile(
      Policy{Limit{Algorithm::gcra, Rate::parse("400/s"), 5, Window::aligned}});
};

TEST_F(ReclaimCost, EachCallReclaimingAThousandDeadReservationsStaysShort) {
  ASSERT_TRUE(user_made_);
  const std::int64_t now = 1'800'000'000'000'000;
  std::vector<detail::Reservation> reserved;
  for (int i = 0; i < dead_reservations + live_cancels; ++i) {
    reserved.push_back(run(loop(), backend_.reserve(request(now + i), 3'600'000'000)));
    ASSERT_TRUE(reserved.back().decision.allowed);
  }
  // Their owners cancel the newest ones: a log every older reservation is moved by.
  for (int i = 0; i < live_cancels; ++i) {
    const detail::Reservation& r = reserved[reserved.size() - 1 - static_cast<std::size_t>(i)];
    ASSERT_EQ(run(loop(), backend_.run_reservation(detail::ReservationOperation::cancel,
                                                   request(now + 5'000 + i), detail::ticket_of(r)))
                  .verdict,
              detail::CancelVerdict::returned);
  }
  // All but those waiting no longer than a lease (40 slots and the burst) are registered.
  ASSERT_GT(held_leases(), dead_reservations - 50);

  // The owner of the rest died: its leases lapse, and the next calls on the key reclaim them.
  std::vector<Clock::duration> calls;
  // Why a probe: on a loaded machine Redis runs late too; the bound grows by what the load cost
  // this process in this run. Why no PING: one would wait behind the calls measured.
  const test::LatenessProbe probe;
  detail::CancelTicket renewed;  // the reservation of version 1
  renewed.version = 1;
  for (std::int64_t at = now + lease_us + 10'000; held_leases() > 0; at += 1'000) {
    const auto start = Clock::now();
    run(loop(),
        backend_.run_reservation(detail::ReservationOperation::renew, request(at), renewed));
    calls.push_back(Clock::now() - start);
    ASSERT_LE(calls.size(), 10u) << "the reservations were not reclaimed";
  }
  for (const auto call : calls) {
    std::printf("[ reclaim cost ] a call reclaiming up to a batch took %.1f ms\n",
                std::chrono::duration<double, std::milli>(call).count());
  }
  EXPECT_LT(*std::max_element(calls.begin(), calls.end()), call_bound + probe.slack());
}

}  // namespace
}  // namespace redlimit
