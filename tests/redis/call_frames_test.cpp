// How many coroutine frames one call makes: each is an allocation, a resumption and a
// destruction per decision, so the call pipeline keeps them few (docs/performance.md).
#include <gtest/gtest.h>

#include "redlimit/client.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/runtime.hpp"
#include "runtime/frame_count.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

class CallFrames : public test::LoopTest {
 protected:
  /// The frames `run()` makes around a task of one frame: not the call's.
  std::uint64_t harness_frames() {
    const std::uint64_t before = detail::frames_allocated();
    run(loop(), [](int) -> Task<int> { co_return 1; }(0));
    return detail::frames_allocated() - before - 1;
  }

  test::RedisServer server_;
};

TEST_F(CallFrames, ALoneTryAcquireOnAFixedPolicyWithMetricsMakesAtMostThreeFrames) {
  Client client(loop(), {.url = server_.url()});
  Limiter limiter(client, Policy::parse("gcra 100/s burst 10"), {.name = "api"});
  ASSERT_NE(client.metrics(), nullptr);
  // Why one call first: it connects and loads the script, which a steady call does not.
  ASSERT_TRUE(run(loop(), limiter.try_acquire("warm")).allowed);
  const std::uint64_t harness = harness_frames();

  const std::uint64_t before = detail::frames_allocated();
  ASSERT_TRUE(run(loop(), limiter.try_acquire("user")).allowed);
  const std::uint64_t frames = detail::frames_allocated() - before - harness;
  std::printf("frames of a lone try_acquire: %llu\n", static_cast<unsigned long long>(frames));
  EXPECT_LE(frames, 3u);

  run(loop(), client.close());
}

}  // namespace
}  // namespace redlimit
