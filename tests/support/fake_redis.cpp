#include "support/fake_redis.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace redlimit::test {
namespace {

/// Reads until `needle` has arrived (or the peer stops sending); returns what arrived.
std::string read_until(int fd, const std::string& needle) {
  std::string received;
  char buffer[4096];
  while (received.find(needle) == std::string::npos) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    received.append(buffer, static_cast<std::size_t>(n));
  }
  return received;
}

/// Answers every PING with +PONG until the peer has sent nothing for 100 ms.
void answer_pings_until_quiet(int fd) {
  const timeval quiet{0, 100'000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &quiet, sizeof quiet);
  const std::string ping = "PING\r\n";
  const std::string pong = "+PONG\r\n";
  std::string received;
  char buffer[4096];
  for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) > 0;) {
    received.append(buffer, static_cast<std::size_t>(n));
    for (std::size_t at; (at = received.find(ping)) != std::string::npos;) {
      received.erase(0, at + ping.size());
      if (write(fd, pong.data(), pong.size()) != static_cast<ssize_t>(pong.size())) return;
    }
  }
  const timeval patient{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &patient, sizeof patient);
}

}  // namespace

FakeRedis::FakeRedis(Ending ending) {
  listener_ = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (listener_ < 0 ||
      bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      listen(listener_, 1) != 0 ||
      getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("FakeRedis: cannot listen on loopback");
  }
  port_ = ntohs(address.sin_port);
  const timeval timeout{5, 0};  // never hang a test: give up after 5 s of silence
  setsockopt(listener_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  thread_ = std::thread([this, ending] { serve(ending); });
}

FakeRedis::~FakeRedis() {
  shutdown(listener_, SHUT_RDWR);
  thread_.join();
  close(listener_);
}

void FakeRedis::serve(Ending ending) {
  const int peer = accept(listener_, nullptr, nullptr);
  if (peer < 0) return;
  const timeval timeout{5, 0};
  setsockopt(peer, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  read_until(peer, "PING\r\n");
  const std::string pong = "+PONG\r\n";
  const bool answered = write(peer, pong.data(), pong.size()) == static_cast<ssize_t>(pong.size());
  if (answered && ending == Ending::unprompted_error) {
    answer_pings_until_quiet(peer);
    const std::string error = "-ERR max number of clients reached\r\n";
    if (write(peer, error.data(), error.size()) == static_cast<ssize_t>(error.size())) {
      read_until(peer, "\n\n");  // never sent: this waits until the client hangs up
    }
  } else if (answered) {
    read_until(peer, "\r\n");
    const std::string garbage = "?garbage\r\n";
    if (ending == Ending::garbage &&
        write(peer, garbage.data(), garbage.size()) == static_cast<ssize_t>(garbage.size())) {
      read_until(peer, "\n\n");  // never sent: this waits until the client hangs up
    }
  }
  if (ending == Ending::reset) {
    const linger abort_on_close{1, 0};
    setsockopt(peer, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
  }
  close(peer);
}

}  // namespace redlimit::test
