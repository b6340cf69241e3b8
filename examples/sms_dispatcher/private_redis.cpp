#include "private_redis.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <stdexcept>

namespace {

/// A loopback port nobody listens on right now (the kernel's choice for port 0).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  const bool ok = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&address), length) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  if (fd >= 0) ::close(fd);
  if (!ok) throw std::runtime_error("no free loopback port");
  return ntohs(address.sin_port);
}

std::string temporary_directory() {
  char pattern[] = "/tmp/redlimit-demo-XXXXXX";
  if (mkdtemp(pattern) == nullptr) throw std::runtime_error("cannot create a temporary directory");
  return pattern;
}

}  // namespace

PrivateRedis::PrivateRedis(uv_loop_t* loop, int port, std::string dir)
    : url_("redis://127.0.0.1:" + std::to_string(port)),
      dir_(std::move(dir)),
      server_(loop,
              {"redis-server", "--port", std::to_string(port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", dir_, "--logfile", ""},
              [this](const std::string& line) {
                if (line.find("Ready to accept connections") != std::string::npos) ready_ = true;
              }) {}

PrivateRedis::~PrivateRedis() {
  ::rmdir(dir_.c_str());
}

redlimit::Task<std::unique_ptr<PrivateRedis>> PrivateRedis::start(uv_loop_t* loop) {
  std::unique_ptr<PrivateRedis> redis(new PrivateRedis(loop, free_port(), temporary_directory()));
  // Why the log line rather than connecting: a refused connection would be logged as a warning.
  for (int attempt = 0; attempt < 250 && redis->server_.running(); ++attempt) {
    if (redis->ready_) co_return redis;
    co_await redlimit::sleep_for(loop, std::chrono::milliseconds(20));
  }
  co_await redis->stop();
  throw std::runtime_error("redis-server did not answer on " + redis->url() + " within 5 s");
}

redlimit::Task<void> PrivateRedis::stop() {
  server_.kill(SIGTERM);
  co_await server_.exited();
}
