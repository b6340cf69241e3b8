// Real processes share one limit: 3 processes x 64 coroutines hammer one key at 5x the limit for
// 5 s. Every admitted decision, merged from all processes, must satisfy the algorithm's exact
// bound (the decision-log checker), and the limiter must admit at least 99% of what a perfect
// client could have had in the same span (a greedy client run on the C++ model). The span ends
// at the last admission that left nothing: there the real clients had taken all they could, as
// the greedy one has, whereas a window that opens just before the processes stop is only
// partly used by them but wholly (at once) by the greedy client.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "algorithms/policy_model.hpp"
#include "limiter/compiled_policy.hpp"
#include "support/decision_checker.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

constexpr int processes = 3;
constexpr int coroutines = 64;
constexpr std::int64_t duration_ms = 5000;

struct AccuracyCase {
  const char* name;
  Limit limit;
};

std::string hammer_binary() {
  const char* path = std::getenv("REDLIMIT_HAMMER");
  return path != nullptr ? path : "hammer";
}

pid_t start_hammer(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  std::vector<std::string> owned = args;
  for (auto& arg : owned)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

/// The permits a perfect client, asking again exactly at each retry_after, gets in
/// [first, last] from a fresh key: what the limit allows in that span.
std::int64_t greedy_admits(const Limit& limit, std::int64_t first, std::int64_t last) {
  const auto policy = detail::CompiledPolicy::compile(Policy::of(limit));
  std::vector<std::optional<detail::LimitState>> states(1);
  std::int64_t admitted = 0;
  for (std::int64_t t = first; t <= last;) {
    const auto outcome =
        detail::decide_policy(policy->specs(), states, t, 1, detail::Mode::acquire);
    if (outcome.allowed) {
      ++admitted;
    } else {
      t += outcome.binding_outcome().retry_after_us;
    }
  }
  return admitted;
}

/// The time of the last admission after which, replayed on the model from a fresh key, the
/// limit had nothing left at that moment (0 if there is none).
std::int64_t last_exhausted(const Limit& limit, std::vector<test::Admit> admits) {
  std::sort(admits.begin(), admits.end(),
            [](const test::Admit& a, const test::Admit& b) { return a.time_us < b.time_us; });
  const auto policy = detail::CompiledPolicy::compile(Policy::of(limit));
  std::vector<std::optional<detail::LimitState>> states(1);
  std::int64_t exhausted_at = 0;
  for (const test::Admit& admit : admits) {
    detail::decide_policy(policy->specs(), states, admit.time_us, admit.permits,
                          detail::Mode::acquire);
    if (!detail::decide_policy(policy->specs(), states, admit.time_us, 1, detail::Mode::peek)
             .allowed) {
      exhausted_at = admit.time_us;
    }
  }
  return exhausted_at;
}

class Accuracy : public ::testing::TestWithParam<AccuracyCase> {
 protected:
  test::RedisServer server_;
};

TEST_P(Accuracy, ProcessesSharingOneKeyNeverExceedTheBoundAndGetWhatItAllows) {
  const Limit& limit = GetParam().limit;
  const double offered_per_process =
      5.0 * limit.rate.permits * 1e6 / static_cast<double>(limit.rate.period.count()) / processes;
  std::vector<pid_t> pids;
  std::vector<std::string> outputs;
  for (int i = 0; i < processes; ++i) {
    outputs.push_back(server_.dir() + "/admits-" + std::to_string(i) + ".txt");
    pids.push_back(start_hammer(
        {hammer_binary(), server_.url(), "shared", std::string(to_string(limit.algorithm)),
         std::to_string(limit.rate.permits), std::to_string(limit.rate.period.count()),
         std::to_string(limit.burst), limit.window == Window::anchored ? "anchored" : "aligned",
         std::to_string(coroutines), std::to_string(duration_ms),
         std::to_string(offered_per_process), outputs.back()}));
  }
  for (const pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "a hammer process failed (errors, or a uv handle left open)";
  }

  std::vector<test::Admit> admits;
  long denied = 0;
  for (const std::string& output : outputs) {
    std::ifstream in(output);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      if (line.rfind("# denied ", 0) == 0) {
        std::string skip;
        long count = 0;
        fields >> skip >> skip >> count;
        denied += count;
        continue;
      }
      test::Admit admit;
      fields >> admit.time_us >> admit.permits;
      admits.push_back(admit);
    }
  }
  ASSERT_GT(admits.size(), 10u);
  const test::CheckResult check = test::check_admits(limit, admits);
  EXPECT_TRUE(check) << check.description;

  const std::int64_t exhausted_at = last_exhausted(limit, admits);
  ASSERT_GT(exhausted_at, 0) << "the limit was never used up";
  std::int64_t first = INT64_MAX;
  std::int64_t admitted_in_span = 0;
  for (const auto& admit : admits) {
    first = std::min(first, admit.time_us);
    if (admit.time_us <= exhausted_at) admitted_in_span += admit.permits;
  }
  const std::int64_t possible = greedy_admits(limit, first, exhausted_at);
  const double efficiency = static_cast<double>(admitted_in_span) / static_cast<double>(possible);
  std::printf("[ %-24s ] %lld admitted, %ld denied, %lld possible in %.3f s: %.2f%%\n",
              GetParam().name, static_cast<long long>(admitted_in_span), denied,
              static_cast<long long>(possible), static_cast<double>(exhausted_at - first) / 1e6,
              100.0 * efficiency);
  EXPECT_GE(efficiency, 0.99);
  EXPECT_GT(denied, static_cast<long>(admits.size())) << "the load must exceed the limit";
  EXPECT_TRUE(server_.keys_without_ttl().empty());
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, Accuracy,
    ::testing::Values(
        AccuracyCase{"gcra", {Algorithm::gcra, {50, 1s}, 50, Window::aligned}},
        AccuracyCase{"token_bucket", {Algorithm::token_bucket, {50, 1s}, 25, Window::aligned}},
        AccuracyCase{"leaky_bucket", {Algorithm::leaky_bucket, {5, 1s}, 5, Window::aligned}},
        AccuracyCase{"fixed_window", {Algorithm::fixed_window, {50, 1s}, 0, Window::aligned}},
        AccuracyCase{"fixed_window_anchored",
                     {Algorithm::fixed_window, {50, 1s}, 0, Window::anchored}},
        AccuracyCase{"sliding_window_log",
                     {Algorithm::sliding_window_log, {50, 1s}, 0, Window::aligned}},
        AccuracyCase{"sliding_window_counter",
                     {Algorithm::sliding_window_counter, {50, 1s}, 0, Window::aligned}}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace redlimit
