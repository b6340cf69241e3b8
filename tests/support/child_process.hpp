#pragma once

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace redlimit::test {

/// Starts `args[0]` (a path) with `args` as its argv; returns its PID (wait for it with waitpid).
inline pid_t start_process(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& arg : args)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

/// Starts `args[0]` (looked up in PATH) with `args` as its argv, its standard input and output
/// on /dev/null (standard error inherited); it dies with the test process, even one that is
/// killed. Returns its PID: stop it by that PID.
inline pid_t start_server_process(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& arg : args)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) throw std::runtime_error("fork failed");
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    const int null_fd = open("/dev/null", O_RDWR);
    dup2(null_fd, STDIN_FILENO);
    dup2(null_fd, STDOUT_FILENO);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  return child;
}

/// The hammer process the tests start (tests/redis/hammer.cpp): $REDLIMIT_HAMMER, else "hammer".
inline std::string hammer_binary() {
  const char* path = std::getenv("REDLIMIT_HAMMER");
  return path != nullptr ? path : "hammer";
}

}  // namespace redlimit::test
