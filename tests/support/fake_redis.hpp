#pragma once

#include <string>
#include <thread>

namespace redlimit::test {

/// A scripted Redis peer on a free loopback port, served by a thread, for faults a real server
/// does not produce on demand. It accepts one connection, answers the client's setup PING with
/// +PONG, reads the next command bytes, and then ends the connection as asked.
class FakeRedis {
 public:
  enum class Ending {
    reset,  ///< an RST (SO_LINGER 0): the client sees "Connection reset by peer"
    close,  ///< an orderly close (FIN)
  };

  explicit FakeRedis(Ending ending);
  ~FakeRedis();
  FakeRedis(const FakeRedis&) = delete;
  FakeRedis& operator=(const FakeRedis&) = delete;

  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  void serve(Ending ending);

  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace redlimit::test
