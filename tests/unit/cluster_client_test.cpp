// The cluster client against a scripted node: the bounds a real cluster cannot be made to hit on
// demand (a redirect loop, a slot that stays in TRYAGAIN).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "redis/reply_convert.hpp"
#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "support/loop_test.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

/// A one-node "cluster" on a free loopback port, served by a thread: it answers PING, and
/// CLUSTER SLOTS with every slot on itself; every other command gets `error`, in which "PORT"
/// stands for its own port.
class ScriptedNode {
 public:
  explicit ScriptedNode(std::string error) : error_(std::move(error)) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        listen(listener_, 8) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      throw std::runtime_error("ScriptedNode: cannot listen");
    }
    port_ = ntohs(address.sin_port);
    if (const auto at = error_.find("PORT"); at != std::string::npos) {
      error_.replace(at, 4, std::to_string(port_));
    }
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedNode() {
    stop_ = true;
    thread_.join();
    close(listener_);
  }

  std::string url() const { return "redis-cluster://127.0.0.1:" + std::to_string(port_); }
  /// Commands answered with the error so far.
  int errors_sent() const { return errors_sent_.load(); }

 private:
  /// The next complete command in `buffer` (a RESP array of bulk strings), removed from it;
  /// empty if none is complete yet.
  static std::vector<std::string> take_command(std::string& buffer) {
    std::size_t at = 0;
    auto line = [&]() -> std::optional<std::string> {
      const auto end = buffer.find("\r\n", at);
      if (end == std::string::npos) return std::nullopt;
      std::string text = buffer.substr(at, end - at);
      at = end + 2;
      return text;
    };
    const auto header = line();
    if (!header) return {};
    std::vector<std::string> argv;
    for (int i = 0; i < std::stoi(header->substr(1)); ++i) {
      const auto size = line();
      if (!size) return {};
      const std::size_t length = std::stoul(size->substr(1));
      if (buffer.size() < at + length + 2) return {};
      argv.push_back(buffer.substr(at, length));
      at += length + 2;
    }
    buffer.erase(0, at);
    return argv;
  }

  std::string answer(const std::vector<std::string>& argv) {
    if (argv[0] == "PING") return "+PONG\r\n";
    if (argv[0] == "CLUSTER") {
      return "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:" + std::to_string(port_) +
             "\r\n";
    }
    ++errors_sent_;
    return "-" + error_ + "\r\n";
  }

  void serve() {
    std::map<int, std::string> buffers;
    while (!stop_) {
      std::vector<pollfd> fds = {{listener_, POLLIN, 0}};
      for (const auto& [fd, buffer] : buffers)
        fds.push_back({fd, POLLIN, 0});
      if (poll(fds.data(), fds.size(), 20) <= 0) continue;
      if (fds[0].revents & POLLIN) buffers[accept(listener_, nullptr, nullptr)];
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        char chunk[4096];
        const ssize_t got = read(fds[i].fd, chunk, sizeof chunk);
        if (got <= 0) {
          close(fds[i].fd);
          buffers.erase(fds[i].fd);
          continue;
        }
        std::string& buffer = buffers[fds[i].fd];
        buffer.append(chunk, static_cast<std::size_t>(got));
        for (auto argv = take_command(buffer); !argv.empty(); argv = take_command(buffer)) {
          const std::string reply = answer(argv);
          if (write(fds[i].fd, reply.data(), reply.size()) < 0) break;
        }
      }
    }
    for (const auto& [fd, buffer] : buffers)
      close(fd);
  }

  std::string error_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_ = false;
  std::atomic<int> errors_sent_ = 0;
  std::thread thread_;
};

/// The error code a command ends with ("" if it succeeds).
std::string error_code_of(uv_loop_t* loop, Client& client) {
  try {
    run(loop, client.command("GET", "k"));
  } catch (const ReplyError& e) {
    return e.code();
  }
  return "";
}

class ClusterClientTest : public test::LoopTest {};

TEST_F(ClusterClientTest, ARedirectLoopIsFollowedFiveRedirectsAtATimeWithPausesUntilTheDeadline) {
  ScriptedNode node("MOVED 1234 127.0.0.1:PORT");
  Client client(loop(), {.url = node.url(), .command_timeout = 1s});
  run(loop(), client.connect());
  const auto start = std::chrono::steady_clock::now();
  std::exception_ptr failure;
  try {
    run(loop(), client.command("GET", "k"));
  } catch (const Error&) {
    failure = std::current_exception();
  }
  ASSERT_TRUE(failure) << "a redirect loop never answers";
  // The last redirect, or the deadline while a try was on its way: Redis was not available.
  EXPECT_TRUE(detail::means_unavailable(failure)) << detail::describe(failure);
  EXPECT_LE(test::elapsed_since(start), 1s + test::deadline_slack);
  // Rounds of a try and five redirects, with backoff of 2, 4, 8 ... 100 ms between rounds: more
  // than one round within 1 s, and not a busy loop.
  EXPECT_GE(node.errors_sent(), 2 * 6);
  EXPECT_LE(node.errors_sent(), 20 * 6);
  run(loop(), client.close());
}

TEST_F(ClusterClientTest, TryAgainIsRetriedWithBackoffUntilTheDeadline) {
  ScriptedNode node("TRYAGAIN Multiple keys request during rehashing of slot");
  Client client(loop(), {.url = node.url(), .command_timeout = 200ms});
  run(loop(), client.connect());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(error_code_of(loop(), client), "TRYAGAIN");
  EXPECT_LE(test::elapsed_since(start), 200ms + test::deadline_slack);
  // Backoff of 2, 4, 8 ... 100 ms: a handful of tries within 200 ms, not a busy loop.
  EXPECT_GE(node.errors_sent(), 3);
  EXPECT_LE(node.errors_sent(), 8);
  run(loop(), client.close());
}

}  // namespace
}  // namespace redlimit
