#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "redlimit/reply.hpp"

namespace redlimit::test {

/// A private redis-server for one test: started on a free loopback port with a temporary
/// directory, no persistence and DEBUG enabled; stopped by its own PID (also when the test
/// fails, and, through PR_SET_PDEATHSIG, when the test process dies).
class RedisServer {
 public:
  /// Starts the server; `extra_args` are appended to its command line (e.g. {"--requirepass",
  /// "secret"}). Throws std::runtime_error if it does not answer PING within 10 s.
  explicit RedisServer(std::vector<std::string> extra_args = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  /// "redis://127.0.0.1:<port>"
  std::string url() const;
  /// The unix socket the server also listens on.
  std::string socket_path() const { return dir_ + "/redis.sock"; }
  const std::string& dir() const { return dir_; }

  /// SIGTERM, then waits for the process to exit.
  void stop();
  /// SIGKILL, then waits for the process to exit.
  void kill();
  /// SIGSTOP / SIGCONT: the server keeps its sockets but does not answer. pause() returns once
  /// the server is stopped.
  void pause();
  void resume();
  /// Starts again on the same port (after stop() or kill()).
  void start();

  /// Sends one command over a short-lived blocking connection to the unix socket (as the
  /// default user, with the password given by `--requirepass`, if any) and returns the reply;
  /// an error reply comes back as Reply::Type::error.
  Reply command(const std::vector<std::string>& argv) const;
  /// Sends `argvs` one after another over one such connection and returns the last reply: for
  /// a command that reads what its connection did before, as WAIT does.
  Reply commands(const std::vector<std::vector<std::string>>& argvs) const;
  /// command(), expecting an integer reply.
  long long integer(const std::vector<std::string>& argv) const;
  /// Every key, by SCAN.
  std::vector<std::string> keys() const;
  /// Keys that would live forever (PTTL -1): a limiter must never leave one.
  std::vector<std::string> keys_without_ttl() const;
  /// The calls counted for `command` by INFO commandstats (e.g. "evalsha").
  long long command_calls(const std::string& command) const;
  /// The script calls counted by INFO commandstats: EVALSHA and EVAL (a client sends a script's
  /// first call on a connection as EVAL).
  long long script_calls() const { return command_calls("evalsha") + command_calls("eval"); }

 private:
  void spawn();
  void wait_until_ready();

  std::vector<std::string> extra_args_;
  std::string password_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

/// The redis-server binary tests start: $REDIS_SERVER, else "redis-server" on PATH.
std::string redis_server_binary();

/// A TCP port on 127.0.0.1 that nothing listens on right now.
int free_port();

/// One command to the server (or sentinel) on 127.0.0.1:`port`, logged in with `password` if
/// not empty, over a short-lived blocking connection; an error reply comes back as
/// Reply::Type::error. Throws std::runtime_error when nothing answers.
Reply tcp_command(int port, const std::string& password, const std::vector<std::string>& argv);

}  // namespace redlimit::test
