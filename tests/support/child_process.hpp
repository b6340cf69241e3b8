#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdlib>
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

/// The hammer process the tests start (tests/redis/hammer.cpp): $REDLIMIT_HAMMER, else "hammer".
inline std::string hammer_binary() {
  const char* path = std::getenv("REDLIMIT_HAMMER");
  return path != nullptr ? path : "hammer";
}

}  // namespace redlimit::test
