#pragma once
// A private redis-server for the demo: started on a free loopback port with no persistence,
// stopped by its own PID.

#include <uv.h>

#include <memory>
#include <string>

#include "child_process.hpp"
#include "redlimit/redlimit.hpp"

/// One redis-server child. Use on the loop's thread.
class PrivateRedis {
 public:
  /// Starts `redis-server` (from PATH) and returns once it accepts connections; throws
  /// std::runtime_error when it cannot be started or does not answer within 5 s.
  static redlimit::Task<std::unique_ptr<PrivateRedis>> start(uv_loop_t* loop);
  PrivateRedis(const PrivateRedis&) = delete;
  PrivateRedis& operator=(const PrivateRedis&) = delete;
  ~PrivateRedis();

  const std::string& url() const noexcept { return url_; }
  /// Stops the server (SIGTERM) and waits for it to exit.
  redlimit::Task<void> stop();

 private:
  PrivateRedis(uv_loop_t* loop, int port, std::string dir);

  std::string url_;
  std::string dir_;
  bool ready_ = false;  ///< the server logged that it accepts connections
  ChildProcess server_;
};
