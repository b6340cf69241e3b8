#pragma once

#include <string>
#include <thread>

namespace redlimit::test {

/// A scripted Redis peer on a free loopback port, served by a thread, for faults a real server
/// does not produce on demand. It accepts one connection, answers the client's setup PING with
/// +PONG, and then ends the connection as asked.
class FakeRedis {
 public:
  enum class Ending {
    reset,  ///< reads the next command bytes, then an RST (SO_LINGER 0): "Connection reset by peer"
    close,  ///< reads the next command bytes, then an orderly close (FIN)
    /// reads the next command bytes, answers them with a line that is not RESP ("?garbage"),
    /// and closes once the client has hung up
    garbage,
    /// answers every PING with +PONG until the client has been quiet for 100 ms, then sends an
    /// error reply no command asked for, "-ERR max number of clients reached" (what Redis sends
    /// before it hangs up on one client too many), and closes once the client has hung up
    unprompted_error,
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
