// The chaos worker's call log: what a killed worker had logged is in its file.
#include "chaos/call_log.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace redlimit::chaos {
namespace {

TEST(ChaosCallLog, AWorkerKilledBySigkillKeepsEveryLoggedDecisionAndGrant) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("redlimit-call-log-" + std::to_string(::getpid()) + ".log");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    CallLog log(path.string());
    CallRecord admitted;
    admitted.outcome = "A";
    admitted.source = "redis";
    admitted.server_us = 1'800'000'000'000'000;
    log.record(0, admitted);
    log.grant(7, 1'800'000'000'000'000, 1'800'000'000'500'000, 1, 1000);
    ::raise(SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(path);
  EXPECT_NE(text.str().find("C 0 0 0 0 1 1 A redis 1800000000000000 0 0 0 0\n"), std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("G 7 1800000000000000 1800000000500000 1 1000\n"), std::string::npos)
      << text.str();
}

}  // namespace
}  // namespace redlimit::chaos
