#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>
#include <stdexcept>
#include <string>

#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "support/loop_test.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using SpawnTest = test::LoopTest;

Task<void> set_flag(bool* flag) {
  *flag = true;
  co_return;
}

Task<void> fail_after_sleep(uv_loop_t* loop, std::string message) {
  co_await sleep_for(loop, 1ms);
  throw std::runtime_error(message);
}

Task<void> spawn_and_wait(uv_loop_t* loop, Task<void> task) {
  spawn(loop, std::move(task));
  co_await sleep_for(loop, 20ms);
}

/// Restores the default error handler when the test ends.
struct HandlerGuard {
  ~HandlerGuard() { set_error_handler({}); }
};

TEST_F(SpawnTest, StartsTheTaskOnTheNextLoopIterationNotInline) {
  bool ran = false;
  spawn(loop(), set_flag(&ran));
  EXPECT_FALSE(ran);
  uv_run(loop(), UV_RUN_DEFAULT);
  EXPECT_TRUE(ran);
}

TEST_F(SpawnTest, SendsTheTaskExceptionToTheErrorHandler) {
  HandlerGuard guard;
  std::string reported;
  set_error_handler([&reported](std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      reported = e.what();
    }
  });
  run(loop(), spawn_and_wait(loop(), fail_after_sleep(loop(), "lost message")));
  EXPECT_EQ(reported, "lost message");
}

TEST_F(SpawnTest, DefaultHandlerLogsTheErrorOnTheRedlimitLogger) {
  std::ostringstream out;
  auto logger = std::make_shared<spdlog::logger>(
      "redlimit", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  spdlog::register_logger(logger);
  run(loop(), spawn_and_wait(loop(), fail_after_sleep(loop(), "nobody awaited me")));
  spdlog::drop("redlimit");
  EXPECT_NE(out.str().find("[error]"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("nobody awaited me"), std::string::npos) << out.str();
}

TEST_F(SpawnTest, AThrowingHandlerIsLoggedNotPropagated) {
  HandlerGuard guard;
  set_error_handler([](std::exception_ptr) { throw std::logic_error("handler failed"); });
  EXPECT_NO_THROW(run(loop(), spawn_and_wait(loop(), fail_after_sleep(loop(), "x"))));
}

}  // namespace
}  // namespace redlimit
