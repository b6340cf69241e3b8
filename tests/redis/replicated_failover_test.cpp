// Failovers under load from three processes sharing one key at twice its limit (the SMS
// dispatcher's shape), each process's decision log checked against the algorithm's exact
// inequality: with ClientOptions::replicas = 1 no admission is ever over the bound, through
// SENTINEL FAILOVER, a Sentinel primary killed (SIGKILL) and a Redis Cluster primary killed;
// with replicas = 0 the same runs print what asynchronous replication lost (no bound asserted:
// docs/operations.md states it).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <ostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "redis/key_slot.hpp"
#include "redlimit/limit.hpp"
#include "support/child_process.hpp"
#include "support/decision_checker.hpp"
#include "support/redis_cluster.hpp"
#include "support/sentinel_group.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

enum class Fault { sentinel_failover, sentinel_kill, cluster_kill };

struct FailoverCase {
  const char* name;
  Fault fault;
  int replicas;
};

void PrintTo(const FailoverCase& c, std::ostream* out) {
  *out << c.name;
}

std::int64_t system_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Waits until `done` says so, or throws after `timeout`.
template <class Done>
void wait_until(Done done, std::chrono::seconds timeout, const char* what) {
  const auto give_up = Clock::now() + timeout;
  while (!done()) {
    if (Clock::now() > give_up) throw std::runtime_error(std::string("timed out: ") + what);
    std::this_thread::sleep_for(50ms);
  }
}

/// The deployment a case runs on, and its fault.
class Deployment {
 public:
  explicit Deployment(Fault fault) : fault_(fault) {
    if (fault == Fault::cluster_kill) {
      cluster_ = std::make_unique<test::RedisCluster>(3, 1);
    } else {
      sentinels_ = std::make_unique<test::SentinelGroup>();
    }
  }
  std::string url() const { return cluster_ ? cluster_->url() : sentinels_->url(); }
  /// Waits until the primary (every primary) counts its replica as holding every write.
  void wait_until_replicated() {
    if (cluster_) {
      cluster_->wait_healthy(60s);
    } else {
      sentinels_->wait_until_replicated(60s);
    }
  }
  std::string dir() const { return cluster_ ? cluster_->node(0).dir() : sentinels_->node(0).dir(); }

  /// Makes the fault happen, and brings the deployment back to a primary with a replica.
  void strike(const std::string& slot_key) {
    switch (fault_) {
      case Fault::sentinel_failover:
        sentinels_->failover_and_rejoin();
        return;
      case Fault::sentinel_kill:
        sentinels_->kill_primary_and_rejoin();
        return;
      case Fault::cluster_kill: {
        const std::size_t old_primary = cluster_->primary_of_slot(detail::key_slot(slot_key));
        cluster_->node(old_primary).kill();
        wait_until(
            [&] {
              try {
                return cluster_->primary_of_slot(detail::key_slot(slot_key)) != old_primary;
              } catch (const std::exception&) {
                return false;
              }
            },
            60s, "the cluster to promote the replica");
        cluster_->node(old_primary).start();
        cluster_->wait_healthy(60s);
        return;
      }
    }
  }

 private:
  Fault fault_;
  std::unique_ptr<test::SentinelGroup> sentinels_;
  std::unique_ptr<test::RedisCluster> cluster_;
};

class ReplicatedFailoverTest : public ::testing::TestWithParam<FailoverCase> {};

TEST_P(ReplicatedFailoverTest, AdmissionsOverTheBoundAreZeroWithAReplica) {
  const FailoverCase c = GetParam();
  Deployment deployment(c.fault);
  deployment.wait_until_replicated();
  // gcra 100/s burst 10, shared by 3 processes of 32 callers offering 200/s in all.
  const Limit limit{Algorithm::gcra, {100, 1s}, 10};
  constexpr int processes = 3;
  const std::string duration_ms = c.fault == Fault::sentinel_failover ? "9000" : "16000";
  std::vector<pid_t> pids;
  std::vector<std::string> outputs;
  for (int p = 0; p < processes; ++p) {
    outputs.push_back(deployment.dir() + "/admits-" + std::to_string(p) + ".txt");
    pids.push_back(
        test::start_process({test::hammer_binary(), deployment.url(), "sms", "gcra", "100",
                             "1000000", "10", "aligned", "32", duration_ms, "66.7", outputs.back(),
                             "failures-expected", "replicas=" + std::to_string(c.replicas)}));
  }
  std::string fault_error;
  Clock::time_point struck;
  std::this_thread::sleep_for(2500ms);
  try {
    struck = Clock::now();
    deployment.strike("{accuracy:sms}");
  } catch (const std::exception& e) {
    fault_error = e.what();
  }
  const double fault_seconds = std::chrono::duration<double>(Clock::now() - struck).count();
  const std::int64_t recovered_us = system_now_us();
  for (const pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a hammer process failed";
  }
  ASSERT_TRUE(fault_error.empty()) << fault_error;

  std::vector<test::Admit> admits;
  std::int64_t after_recovery = 0;
  for (const std::string& output : outputs) {
    const std::vector<test::Admit> some = test::read_hammer_admits(output);
    for (const test::Admit& admit : some)
      after_recovery += admit.time_us >= recovered_us ? admit.permits : 0;
    admits.insert(admits.end(), some.begin(), some.end());
  }
  const test::CheckResult check = test::check_admits(limit, admits);
  const std::int64_t excess = test::largest_excess(limit, admits);
  std::printf(
      "[ failover ] %s: %zu admitted by %d processes (%lld after the fault and its "
      "recovery, %.3f s); beyond the limit: %lld permits\n",
      c.name, admits.size(), processes, static_cast<long long>(after_recovery), fault_seconds,
      static_cast<long long>(excess));
  EXPECT_FALSE(admits.empty());
  if (c.replicas > 0) {
    EXPECT_TRUE(check) << check.description;
    EXPECT_EQ(excess, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Faults, ReplicatedFailoverTest,
    ::testing::Values(FailoverCase{"sentinel_failover_replicas_1", Fault::sentinel_failover, 1},
                      FailoverCase{"sentinel_failover_replicas_0", Fault::sentinel_failover, 0},
                      FailoverCase{"sentinel_kill_replicas_1", Fault::sentinel_kill, 1},
                      FailoverCase{"sentinel_kill_replicas_0", Fault::sentinel_kill, 0},
                      FailoverCase{"cluster_kill_replicas_1", Fault::cluster_kill, 1},
                      FailoverCase{"cluster_kill_replicas_0", Fault::cluster_kill, 0}),
    [](const ::testing::TestParamInfo<FailoverCase>& info) {
      return std::string(info.param.name);
    });

}  // namespace
}  // namespace redlimit
