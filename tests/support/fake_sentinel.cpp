#include "support/fake_sentinel.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace redlimit::test {
namespace {

std::string bulk(const std::string& text) {
  return "$" + std::to_string(text.size()) + "\r\n" + text + "\r\n";
}

/// The arguments of the RESP command at the start of `text`, and its length; nullopt while it
/// has not all arrived.
std::optional<std::pair<std::vector<std::string>, std::size_t>> command_at(
    const std::string& text) {
  if (text.empty() || text[0] != '*') return std::nullopt;
  std::size_t at = text.find("\r\n");
  if (at == std::string::npos) return std::nullopt;
  const int count = std::stoi(text.substr(1, at - 1));
  at += 2;
  std::vector<std::string> args;
  for (int i = 0; i < count; ++i) {
    const std::size_t line_end = text.find("\r\n", at);
    if (line_end == std::string::npos || text[at] != '$') return std::nullopt;
    const std::size_t length = std::stoul(text.substr(at + 1, line_end - at - 1));
    at = line_end + 2;
    if (text.size() < at + length + 2) return std::nullopt;
    args.push_back(text.substr(at, length));
    at += length + 2;
  }
  return std::make_pair(std::move(args), at);
}

}  // namespace

FakeSentinel::FakeSentinel(int port) : primary_port_(port) {
  listener_ = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (listener_ < 0 ||
      bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      listen(listener_, 8) != 0 ||
      getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("FakeSentinel: cannot listen on loopback");
  }
  port_ = ntohs(address.sin_port);
  thread_ = std::thread([this] { serve(); });
}

FakeSentinel::~FakeSentinel() {
  stopping_ = true;
  thread_.join();
  close(listener_);
}

void FakeSentinel::name_primary(int port) {
  primary_port_ = port;
}

void FakeSentinel::switch_primary(int port) {
  const int before = primary_port_.exchange(port);
  const std::lock_guard lock(announcement_mutex_);
  announcement_ =
      "mymaster 127.0.0.1 " + std::to_string(before) + " 127.0.0.1 " + std::to_string(port);
}

void FakeSentinel::stall() {
  stalled_ = true;
  // Why a wait: serve() may be in a poll() begun before, and would answer what it reads there.
  while (!stall_seen_)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

std::string FakeSentinel::answer(std::string& received, bool& subscribed) {
  std::string out;
  while (auto command = command_at(received)) {
    const std::vector<std::string>& args = command->first;
    received.erase(0, command->second);
    const std::string name = args.empty() ? "" : args[0];
    if (name == "PING") {
      out += "+PONG\r\n";
    } else if (name == "SENTINEL" && args.size() == 3 && args[1] == "get-master-addr-by-name") {
      ++questions_;
      out += "*2\r\n" + bulk("127.0.0.1") + bulk(std::to_string(primary_port_.load()));
    } else if (name == "SUBSCRIBE" && args.size() == 2) {
      subscribed = true;
      out += "*3\r\n" + bulk("subscribe") + bulk(args[1]) + ":1\r\n";
    } else {
      out += "-ERR the fake sentinel does not do " + name + "\r\n";
    }
  }
  return out;
}

void FakeSentinel::serve() {
  std::map<int, std::string> peers;  // fd -> bytes received, not yet a whole command
  std::set<int> subscribed;          // the peers that sent SUBSCRIBE
  while (!stopping_) {
    if (stalled_) {
      stall_seen_ = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    std::string announcement;
    {
      const std::lock_guard lock(announcement_mutex_);
      announcement = std::exchange(announcement_, {});
    }
    if (!announcement.empty()) {
      const std::string message =
          "*3\r\n" + bulk("message") + bulk("+switch-master") + bulk(announcement);
      for (const auto& [fd, unused] : peers) {
        // A peer gone is closed by the read below.
        if (subscribed.count(fd) != 0) static_cast<void>(write(fd, message.data(), message.size()));
      }
    }
    std::vector<pollfd> fds{{listener_, POLLIN, 0}};
    for (const auto& [fd, unused] : peers)
      fds.push_back({fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), 20) <= 0) continue;
    if (fds[0].revents & POLLIN) {
      const int peer = accept(listener_, nullptr, nullptr);
      if (peer >= 0) peers[peer];
    }
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n <= 0) {
        close(fds[i].fd);
        peers.erase(fds[i].fd);
        subscribed.erase(fds[i].fd);
        continue;
      }
      std::string& received = peers[fds[i].fd];
      received.append(buffer, static_cast<std::size_t>(n));
      bool subscribing = false;
      const std::string out = answer(received, subscribing);
      if (subscribing) subscribed.insert(fds[i].fd);
      if (!out.empty() && write(fds[i].fd, out.data(), out.size()) < 0) {
        close(fds[i].fd);
        peers.erase(fds[i].fd);
        subscribed.erase(fds[i].fd);
      }
    }
  }
  for (const auto& [fd, unused] : peers)
    close(fd);
}

}  // namespace redlimit::test
