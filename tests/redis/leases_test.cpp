// The semaphore across real processes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "redlimit/client.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/semaphore.hpp"
#include "support/lateness_probe.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

pid_t start_worker(std::vector<std::string> args) {
  const char* binary = std::getenv("REDLIMIT_LEASE_WORKER");
  args.insert(args.begin(), binary != nullptr ? binary : "lease_worker");
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& arg : args)
      argv.push_back(arg.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

std::int64_t unix_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class LeasesTest : public test::LoopTest {
 protected:
  test::RedisServer server_;
};

Task<Clock::duration> take_the_permit(Semaphore& semaphore) {
  const auto start = Clock::now();
  Lease lease = co_await semaphore.acquire("job");
  const auto waited = Clock::now() - start;
  co_await lease.release();
  co_return waited;
}

TEST_F(LeasesTest, AHolderKilledWithSigkillFreesItsPermitWhenTheLeaseExpires) {
  const std::string marker = server_.dir() + "/held.txt";
  const pid_t holder = start_worker({"hold", server_.url(), "1", "800", marker});
  std::int64_t expiry = 0;
  for (int i = 0; i < 500 && expiry == 0; ++i) {
    std::ifstream in(marker);
    std::string word;
    in >> word >> expiry;
    if (expiry == 0) std::this_thread::sleep_for(10ms);
  }
  ASSERT_GT(expiry, 0) << "the holder did not get its lease";
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);

  Client client(loop(), {.url = server_.url()});
  Semaphore semaphore(client, 1, "workers", 800ms);
  const test::LatenessProbe probe(server_.port());
  const std::int64_t before = unix_us();
  const Clock::duration waited = run(loop(), take_the_permit(semaphore));
  // Redis runs on this machine: its clock is ours. The permit is free at the expiry, not before.
  const auto until_expiry = std::chrono::microseconds(expiry - before);
  EXPECT_GE(waited, until_expiry - 5ms);
  EXPECT_LT(waited, until_expiry + probe.slack())
      << "the machine's worst delay meanwhile: " << probe.worst().count() << " us";
  run(loop(), client.close());
  EXPECT_TRUE(server_.keys_without_ttl().empty());
}

TEST_F(LeasesTest, LeasesHeldAtOnceAcrossProcessesNeverExceedTheCapacity) {
  constexpr int capacity = 5;
  std::vector<std::string> outputs;
  std::vector<pid_t> pids;
  for (int i = 0; i < 3; ++i) {
    outputs.push_back(server_.dir() + "/leases-" + std::to_string(i) + ".txt");
    pids.push_back(start_worker(
        {"churn", server_.url(), std::to_string(capacity), "200", outputs.back(), "20", "3000"}));
  }
  for (const pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a worker failed";
  }
  // A sweep over server times: +permits at each grant, -permits when they became free (at the
  // same microsecond, a release comes before a grant: Redis ran them in that order).
  std::vector<std::pair<std::int64_t, std::int64_t>> events;
  std::size_t leases = 0;
  for (const auto& output : outputs) {
    std::ifstream in(output);
    std::int64_t granted = 0;
    std::int64_t end = 0;
    std::int64_t permits = 0;
    while (in >> granted >> end >> permits) {
      events.emplace_back(granted, permits);
      events.emplace_back(end, -permits);
      ++leases;
    }
  }
  std::sort(events.begin(), events.end());
  std::int64_t held = 0;
  std::int64_t most = 0;
  for (const auto& [time, change] : events) {
    held += change;
    most = std::max(most, held);
  }
  std::printf("[ leases ] %zu leases, at most %lld permits held at once\n", leases,
              static_cast<long long>(most));
  EXPECT_GT(leases, 100u);
  EXPECT_LE(most, capacity) << "more permits held at once than the semaphore allows";
  EXPECT_EQ(most, capacity) << "under this load the semaphore should be full at times";
  EXPECT_TRUE(server_.keys_without_ttl().empty());
}

}  // namespace
}  // namespace redlimit
