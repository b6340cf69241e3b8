// A command's deadline judges whether Redis answered in time, not whether the loop got round to
// reading the answer in time. libuv runs the due timers before it polls for I/O, so when the
// application keeps the loop busy after a poll (its own I/O callbacks, a check handle) past a
// command's deadline, the command's reply may be waiting in the socket when the deadline timer
// fires. The connection reads what the socket holds before it judges a deadline
// (Connection::read_arrived_replies); without that, such a command failed with TimeoutError and
// its connection was dropped, although Redis had answered in time.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <uv.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto command_timeout = 100ms;
/// How long past the latest the deadline can be that the busy turn lasts: the deadline timer
/// counts whole milliseconds, rounded up.
constexpr auto past_the_deadline = 20ms;

/// Whether Redis holds a client blocked in BLPOP.
bool blocked_in_redis(const test::RedisServer& server) {
  const std::string info = server.command({"INFO", "clients"}).as_string();
  return info.find("blocked_clients:0") == std::string::npos;
}

/// The application's work after the loop polled: a check callback that, once the client's BLPOP
/// waits in Redis, makes Redis answer it and keeps the loop busy until the command's deadline
/// has passed. The loop's next turn then runs the deadline timer with the reply in the socket.
struct BusyTurn {
  explicit BusyTurn(uv_loop_t* loop, const test::RedisServer& server) : server(server) {
    uv_check_init(loop, &check);
    check.data = this;
    uv_check_start(&check, &on_check);
    // Why: an active idle handle makes the loop poll without waiting, so the check runs every
    // turn while the BLPOP is on its way to Redis.
    uv_idle_init(loop, &idle);
    uv_idle_start(&idle, [](uv_idle_t*) {});
  }
  void close() {
    uv_close(reinterpret_cast<uv_handle_t*>(&check), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&idle), nullptr);
  }

  static void on_check(uv_check_t* handle) {
    auto& turn = *static_cast<BusyTurn*>(handle->data);
    if (!blocked_in_redis(turn.server)) return;
    // The BLPOP was sent before now, so its deadline is before now + command_timeout.
    const auto deadline_passed = Clock::now() + command_timeout + past_the_deadline;
    turn.server.command({"LPUSH", "q", "x"});
    // Why: Redis writes the LPUSH's and the BLPOP's replies in the same turn; once a later
    // command is answered, the BLPOP's reply is in the client's socket.
    turn.server.command({"PING"});
    std::this_thread::sleep_until(deadline_passed);
    uv_check_stop(&turn.check);
    uv_idle_stop(&turn.idle);
    turn.reply_waited_past_the_deadline = true;
  }

  const test::RedisServer& server;
  uv_check_t check{};  // closed by close(), before the loop is
  uv_idle_t idle{};
  bool reply_waited_past_the_deadline = false;
};

struct Outcome {
  std::optional<Reply> reply;
  std::string error;
};

Task<void> blpop(Client& client, Outcome* outcome) {
  std::vector<std::string> argv{"BLPOP", "q", "0"};
  try {
    outcome->reply = co_await client.command(std::move(argv));
  } catch (const Error& e) {
    outcome->error = e.what();
  }
}

Task<std::int64_t> client_id(Client& client) {
  std::vector<std::string> argv{"CLIENT", "ID"};
  const Reply id = co_await client.command(std::move(argv));
  co_return id.as_integer();
}

class CommandDeadline : public test::LoopTest {
 protected:
  test::RedisServer server_;
};

TEST_F(CommandDeadline, AReplyWaitingInTheSocketWhenItsDeadlineFiresCompletesTheCommand) {
  Client client(loop(), {.url = server_.url(),
                         .command_timeout = command_timeout,
                         .logger = std::make_shared<spdlog::logger>("quiet")});
  const std::int64_t connection = run(loop(), client_id(client));
  BusyTurn turn(loop(), server_);
  Outcome outcome;
  run(loop(), blpop(client, &outcome));
  turn.close();
  const std::int64_t connection_after = run(loop(), client_id(client));
  run(loop(), client.close());

  EXPECT_TRUE(turn.reply_waited_past_the_deadline);
  ASSERT_TRUE(outcome.reply) << "Redis answered in time, yet: " << outcome.error;
  ASSERT_EQ(outcome.reply->as_array().size(), 2u);
  EXPECT_EQ(outcome.reply->as_array()[1].as_string(), "x");
  EXPECT_EQ(connection_after, connection) << "the connection was kept";
}

}  // namespace
}  // namespace redlimit
