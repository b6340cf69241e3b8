// Real processes share one limit: 3 processes x 64 coroutines hammer one key at 5x the limit for
// 5 s. Every admitted decision, merged from all processes, must satisfy the algorithm's exact
// bound (the decision-log checker), and every decision made in Redis must be the limit's:
// replayed on the C++ model in server-time order, the model decides each one the same way. So
// the limiter neither admits too much nor denies what it could allow.
//
// The test also prints its efficiency: what was admitted against what a perfect client (greedy,
// asking again exactly at each retry_after, run on the model) could have had in the same span.
// It is a figure, not an assertion: clients that wake late on a busy machine lose permits
// without any fault of the limiter (a sliding log carries each delay into every later window).
// The span ends at the last admission that left nothing: there the real clients had taken all
// they could, as the greedy one has, whereas a window that opens just before the processes stop
// is only partly used by them but wholly (at once) by the greedy client.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "algorithms/policy_model.hpp"
#include "policy/compiled_policy.hpp"
#include "support/child_process.hpp"
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

using test::hammer_binary;
using test::start_process;

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

/// The first decision (server time) on which the model, replaying admissions and denials in
/// server-time order, disagrees with Redis; 0 if it agrees on every one. Admissions at the same
/// microsecond as a denial count as before it, in the limiter's favour.
std::int64_t first_disagreement(const Limit& limit, const std::vector<test::Admit>& admits,
                                const std::vector<std::int64_t>& denials) {
  struct Event {
    std::int64_t time_us;
    bool admitted;
    std::int64_t permits;
  };
  std::vector<Event> events;
  for (const test::Admit& admit : admits)
    events.push_back({admit.time_us, true, admit.permits});
  for (const std::int64_t time : denials)
    events.push_back({time, false, 1});
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.time_us != b.time_us ? a.time_us < b.time_us : a.admitted > b.admitted;
  });
  const auto policy = detail::CompiledPolicy::compile(Policy::of(limit));
  std::vector<std::optional<detail::LimitState>> states(1);
  for (const Event& event : events) {
    const bool allowed = detail::decide_policy(policy->specs(), states, event.time_us,
                                               event.permits, detail::Mode::acquire)
                             .allowed;
    if (allowed != event.admitted) return event.time_us;
  }
  return 0;
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
    pids.push_back(start_process(
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
  std::vector<std::int64_t> denials;
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
      if (line.rfind("deny ", 0) == 0) {
        std::string skip;
        std::int64_t time = 0;
        fields >> skip >> time;
        denials.push_back(time);
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
  ASSERT_FALSE(denials.empty());
  EXPECT_EQ(first_disagreement(limit, admits, denials), 0)
      << "at this server time (us) Redis decided what the limit does not: a denial the limit "
         "allowed, or an admission it did not";

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
  std::printf(
      "[ %-24s ] %lld admitted, %ld denied (%zu in Redis), %lld possible in %.3f s: "
      "%.2f%% efficiency\n",
      GetParam().name, static_cast<long long>(admitted_in_span), denied, denials.size(),
      static_cast<long long>(possible), static_cast<double>(exhausted_at - first) / 1e6,
      100.0 * efficiency);
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
