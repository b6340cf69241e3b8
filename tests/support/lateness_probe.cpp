#include "support/lateness_probe.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>

#include "support/loop_test.hpp"

namespace redlimit::test {
namespace {

using Clock = std::chrono::steady_clock;

/// A blocking connection to 127.0.0.1:`port`; -1 if it cannot be made.
int connect_to(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // Why a receive timeout: a server a test stops (SIGSTOP) must not hold the probe.
  const timeval second{.tv_sec = 1, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &second, sizeof second);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/// One PING on `fd`; false if the connection failed.
bool ping(int fd) {
  static constexpr char command[] = "PING\r\n";
  // Why MSG_NOSIGNAL: a server gone must fail the PING, not raise SIGPIPE in the test.
  if (send(fd, command, sizeof command - 1, MSG_NOSIGNAL) !=
      static_cast<ssize_t>(sizeof command - 1))
    return false;
  char reply[16];
  std::size_t got = 0;
  while (got < 7) {  // "+PONG\r\n"
    const ssize_t n = read(fd, reply + got, sizeof reply - got);
    if (n <= 0) return false;
    got += static_cast<std::size_t>(n);
  }
  return true;
}

/// The second field of a thread's schedstat: its total time ready to run but not running.
std::chrono::nanoseconds run_delay(const std::string& schedstat) {
  std::ifstream in(schedstat);
  std::int64_t on_cpu_ns = 0;
  std::int64_t run_delay_ns = 0;
  in >> on_cpu_ns >> run_delay_ns;
  return std::chrono::nanoseconds(in ? run_delay_ns : 0);
}

}  // namespace

LatenessProbe::LatenessProbe(std::optional<int> redis_port)
    : schedstat_("/proc/" + std::to_string(getpid()) + "/task/" +
                 std::to_string(syscall(SYS_gettid)) + "/schedstat"),
      run_delay_at_start_(run_delay(schedstat_)),
      thread_([this, redis_port] { measure(redis_port); }) {}

LatenessProbe::~LatenessProbe() {
  stopping_ = true;
  thread_.join();
}

void LatenessProbe::measure(std::optional<int> redis_port) {
  int fd = redis_port ? connect_to(*redis_port) : -1;
  const auto note = [this](Clock::duration delay) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(delay).count();
    std::int64_t seen = worst_us_.load();
    while (us > seen && !worst_us_.compare_exchange_weak(seen, us)) {
    }
  };
  constexpr auto nap = std::chrono::milliseconds(2);
  while (!stopping_) {
    const auto before = Clock::now();
    std::this_thread::sleep_for(nap);
    const auto slept = Clock::now();
    note(slept - before - nap);
    if (fd < 0) continue;
    const std::lock_guard<std::mutex> in_flight(ping_);
    if (!pinging_) {
      close(fd);
      fd = -1;
    } else if (ping(fd)) {
      note(Clock::now() - slept);
    } else {  // the server went away: no more PINGs (a failed one is not a delay)
      close(fd);
      fd = -1;
    }
  }
  if (fd >= 0) close(fd);
}

void LatenessProbe::stop_pinging() {
  pinging_ = false;
  const std::lock_guard<std::mutex> wait_for_the_one_in_flight(ping_);
}

std::chrono::microseconds LatenessProbe::worst() const {
  return std::chrono::microseconds(worst_us_.load());
}

std::chrono::microseconds LatenessProbe::waited_for_a_cpu() const {
  const auto waited = run_delay(schedstat_) - run_delay_at_start_;
  return std::chrono::duration_cast<std::chrono::microseconds>(
      std::max(waited, std::chrono::nanoseconds(0)));
}

std::chrono::microseconds LatenessProbe::slack() const {
  return deadline_slack + 2 * worst() + waited_for_a_cpu();
}

}  // namespace redlimit::test
