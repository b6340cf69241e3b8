// try_acquire_all(): one decision over several (limiter, key) claims, all or nothing: per user
// and for the whole service, per IP and per account.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "algorithms/policy_model.hpp"
#include "policy/compiled_policy.hpp"
#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/policy_store.hpp"
#include "redlimit/runtime.hpp"
#include "support/child_process.hpp"
#include "support/decision_checker.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

class ClaimsTest : public test::LoopTest {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    // Stored policies live until deleted; every other key expires.
    for (const std::string& key : server_.keys_without_ttl())
      EXPECT_NE(key.find(":policy"), std::string::npos) << key << " has no TTL";
    LoopTest::TearDown();
  }
  Client& client() { return client_; }

  test::RedisServer server_;

 private:
  Client client_{loop(), ClientOptions{.url = server_.url()}};
};

/// A fixed window of `permits` per `period` anchored at the key's first decision: the tests'
/// exact counts never straddle an aligned window's end.
Limit anchored_window(std::int64_t permits, std::chrono::seconds period) {
  Limit limit = Limit::fixed_window({permits, period});
  limit.window = Window::anchored;
  return limit;
}

/// The error try_acquire_all(claims) throws, as "<type>: <message>", or "no error".
std::string error_of(uv_loop_t* loop, std::vector<Claim> claims) {
  try {
    run(loop, try_acquire_all(std::move(claims)));
    return "no error";
  } catch (const InvalidArgument& e) {
    return std::string("InvalidArgument: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("other: ") + e.what();
  }
}

TEST_F(ClaimsTest, AGlobalDenialSpendsNothingOfTheUsersQuota) {
  Limiter per_user(client(), Policy::of(anchored_window(100, 60s)), {.name = "per-user"});
  Limiter global(client(), Policy::of(anchored_window(3, 60s)), {.name = "global"});
  for (int i = 0; i < 3; ++i) {
    const std::string user = "user-" + std::to_string(i);
    EXPECT_TRUE(run(loop(), try_acquire_all({{&per_user, user}, {&global, "all"}})).allowed);
  }
  for (int i = 0; i < 5; ++i) {
    const Decision denied = run(loop(), try_acquire_all({{&per_user, "user-9"}, {&global, "all"}}));
    EXPECT_FALSE(denied.allowed);
    EXPECT_EQ(denied.claim, 1u) << "the global limit denied";
    EXPECT_EQ(denied.limit, 3);
    EXPECT_GT(denied.retry_after, 0us);
  }
  EXPECT_EQ(run(loop(), per_user.peek("user-9")).remaining, 100) << "nothing was taken";
  EXPECT_EQ(run(loop(), per_user.peek("user-0")).remaining, 99);
}

TEST_F(ClaimsTest, AnAdmissionTakesEveryClaimsPermitsAndNamesTheTightest) {
  Limiter per_ip(client(), Policy::of(Limit::gcra({10, 1s})), {.name = "per-ip"});
  Limiter per_account(client(), Policy{anchored_window(1000, 24h), Limit::token_bucket({5, 1s})},
                      {.name = "per-account"});
  const Decision allowed =
      run(loop(), try_acquire_all({{&per_ip, "10.0.0.1", 2}, {&per_account, "acct-1", 3}}));
  EXPECT_TRUE(allowed.allowed);
  EXPECT_EQ(allowed.claim, 1u);
  EXPECT_EQ(allowed.binding, 1u) << "the token bucket: 2 left";
  EXPECT_EQ(allowed.remaining, 2);
  EXPECT_EQ(allowed.source, Source::redis);
  EXPECT_EQ(run(loop(), per_ip.peek("10.0.0.1")).remaining, 8);
  EXPECT_EQ(run(loop(), per_account.peek("acct-1")).remaining, 2);
  // The account's bucket denies 3 more: the IP keeps its 8.
  const Decision denied =
      run(loop(), try_acquire_all({{&per_ip, "10.0.0.1", 3}, {&per_account, "acct-1", 3}}));
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.claim, 1u);
  EXPECT_EQ(denied.binding, 1u);
  EXPECT_EQ(run(loop(), per_ip.peek("10.0.0.1")).remaining, 8);
}

TEST_F(ClaimsTest, PeekAllTellsWhetherTheClaimsWouldPassAndTakesNothing) {
  Limiter per_user(client(), Policy::of(Limit::gcra({100, 60s})), {.name = "per-user"});
  Limiter global(client(), Policy::of(anchored_window(2, 60s)), {.name = "global"});
  Limiter local_user(loop(), Policy::of(Limit::gcra({100, 60s})), {.name = "per-user"});
  Limiter local_global(loop(), Policy::of(anchored_window(2, 60s)), {.name = "global"});
  const std::pair<Limiter*, Limiter*> pairs[] = {{&per_user, &global},
                                                 {&local_user, &local_global}};
  for (const auto& [user, all] : pairs) {
    const Decision fresh = run(loop(), peek_all({{user, "a", 2}, {all, "all", 2}}));
    EXPECT_TRUE(fresh.allowed);
    EXPECT_EQ(fresh.claim, 1u);
    EXPECT_EQ(fresh.remaining, 2) << "the permits available now";
    EXPECT_TRUE(run(loop(), try_acquire_all({{user, "a"}, {all, "all"}})).allowed);
    const Decision one_left = run(loop(), peek_all({{user, "a", 2}, {all, "all", 2}}));
    EXPECT_FALSE(one_left.allowed);
    EXPECT_EQ(one_left.claim, 1u);
    EXPECT_EQ(one_left.remaining, 1);
    EXPECT_GT(one_left.retry_after, 0us);
    EXPECT_EQ(run(loop(), user->peek("a")).remaining, 99) << "peek_all took nothing";
    EXPECT_EQ(run(loop(), all->peek("all")).remaining, 1);
  }
}

TEST_F(ClaimsTest, InProcessLimitersDecideAllOrNothingToo) {
  Limiter per_user(loop(), Policy::of(Limit::gcra({100, 60s})), {.name = "per-user"});
  Limiter global(loop(), Policy::of(anchored_window(2, 60s)), {.name = "global"});
  EXPECT_TRUE(run(loop(), try_acquire_all({{&per_user, "a"}, {&global, "all"}})).allowed);
  EXPECT_TRUE(run(loop(), try_acquire_all({{&per_user, "b"}, {&global, "all"}})).allowed);
  const Decision denied = run(loop(), try_acquire_all({{&per_user, "c"}, {&global, "all"}}));
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.claim, 1u);
  EXPECT_EQ(denied.source, Source::local);
  EXPECT_EQ(run(loop(), per_user.peek("c")).remaining, 100);
}

TEST_F(ClaimsTest, AFollowersClaimIsDecidedUnderItsStoredPolicy) {
  PolicyStore store(client());
  run(loop(), store.set("tenant", Policy::of(anchored_window(2, 60s))));
  Limiter tenant(client(), {.name = "tenant"});
  Limiter endpoint(client(), Policy::of(Limit::gcra({50, 1s})), {.name = "endpoint"});
  for (int i = 0; i < 2; ++i) {
    const Decision allowed =
        run(loop(), try_acquire_all({{&endpoint, "/search"}, {&tenant, "acme"}}));
    EXPECT_TRUE(allowed.allowed);
  }
  const Decision denied = run(loop(), try_acquire_all({{&endpoint, "/search"}, {&tenant, "acme"}}));
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.claim, 1u);
  EXPECT_EQ(denied.policy_version, 1);
  EXPECT_EQ(run(loop(), endpoint.peek("/search")).remaining, 48);
}

TEST_F(ClaimsTest, RedisFailingLetsEachLimitersFailurePolicyAnswerForItsClaim) {
  Client unreachable(loop(), {.url = "redis://127.0.0.1:" + std::to_string(test::free_port()),
                              .connect_timeout = 100ms,
                              .command_timeout = 200ms});
  Limiter open(unreachable, Policy::of(Limit::gcra({10, 1s})),
               {.name = "open", .on_failure = {.kind = FailurePolicy::fail_open}});
  Limiter closed(unreachable, Policy::of(Limit::gcra({10, 1s})),
                 {.name = "closed", .on_failure = {.kind = FailurePolicy::fail_closed}});
  const Decision both_open = run(loop(), try_acquire_all({{&open, "a"}}));
  EXPECT_TRUE(both_open.allowed);
  EXPECT_EQ(both_open.source, Source::fail_open);
  const Decision one_closed = run(loop(), try_acquire_all({{&open, "a"}, {&closed, "a"}}));
  EXPECT_FALSE(one_closed.allowed);
  EXPECT_EQ(one_closed.claim, 1u);
  EXPECT_EQ(one_closed.source, Source::fail_closed);
  run(loop(), unreachable.close());
}

TEST_F(ClaimsTest, BadClaimsAreRefusedBeforeAnyIo) {
  Limiter a(client(), Policy::of(Limit::gcra({10, 1s})), {.name = "a"});
  Limiter shadow(client(), Policy::of(Limit::gcra({10, 1s})), {.name = "s", .shadow = true});
  Limiter local(loop(), Policy::of(Limit::gcra({10, 1s})), {.name = "local"});
  Limiter moved(client(), Policy::of(Limit::gcra({10, 1s})), {.name = "m"});
  Limiter taker = std::move(moved);
  const std::pair<std::vector<Claim>, std::string> cases[] = {
      {{}, "at least one Claim"},
      {{{nullptr, "k"}}, "Claim 0: the limiter is null"},
      {{{&a, "k"}, {&moved, "k"}}, "Claim 1: the limiter was moved from"},
      {{{&a, ""}}, "key"},
      {{{&a, "k", 0}}, "Claim 0: permits must be at least 1"},
      {{{&a, "k", 11}}, "permits"},
      {{{&a, "k"}, {&a, "k"}}, "Claim 0 and Claim 1 name the same Redis key"},
      {{{&a, "k"}, {&shadow, "k"}}, "shadow mode"},
      {{{&a, "k"}, {&local, "k"}}, "does not use the Client of claim 0's limiter"},
      {{{&local, "k"}, {&local, "k"}}, "Claim 0 and Claim 1 name the same key 'k'"},
  };
  for (const auto& [claims, expected] : cases) {
    const std::string error = error_of(loop(), claims);
    EXPECT_NE(error.find("InvalidArgument"), std::string::npos) << error;
    EXPECT_NE(error.find(expected), std::string::npos) << error;
  }
  EXPECT_TRUE(server_.keys_without_ttl().empty());
  EXPECT_EQ(run(loop(), a.peek("k")).remaining, 10) << "nothing was taken";
}

/// The claims hammer process (tests/redis/claims_hammer.cpp): $REDLIMIT_CLAIMS_HAMMER.
std::string claims_hammer_binary() {
  const char* path = std::getenv("REDLIMIT_CLAIMS_HAMMER");
  return path != nullptr ? path : "claims_hammer";
}

TEST_F(ClaimsTest, ProcessesNeverExceedEitherLimitNorSpendAUsersPermitOnAGlobalDenial) {
  // Eight users at up to 20/s each could take 160/s; the global limit is 100/s, so it denies
  // requests their user's limit would have allowed. Three processes offer 600/s in all.
  constexpr int processes = 3;
  constexpr int users = 8;
  const Limit per_user = Limit::gcra({20, 1s}, 5);
  const Limit global = Limit::gcra({100, 1s}, 10);
  std::vector<pid_t> pids;
  std::vector<std::string> outputs;
  for (int i = 0; i < processes; ++i) {
    outputs.push_back(server_.dir() + "/claims-" + std::to_string(i) + ".txt");
    pids.push_back(
        test::start_process({claims_hammer_binary(), server_.url(), std::to_string(users), "16",
                             "2000", "200", outputs.back()}));
  }
  for (const pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a claims_hammer failed";
  }
  std::vector<test::Admit> all;
  std::vector<std::vector<test::Admit>> of_user(users);
  long denied_by_global = 0;
  for (const std::string& output : outputs) {
    std::ifstream in(output);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      if (line.starts_with("#")) {
        std::string skip;
        long count = 0;
        fields >> skip >> skip >> skip >> skip >> count;
        denied_by_global += count;
        continue;
      }
      std::int64_t time = 0;
      int user = 0;
      fields >> time >> user;
      all.push_back({time, 1});
      of_user.at(static_cast<std::size_t>(user)).push_back({time, 1});
    }
  }
  const test::CheckResult global_check = test::check_admits(global, all);
  EXPECT_TRUE(global_check) << "global: " << global_check.description;
  EXPECT_GT(denied_by_global, 0) << "the global limit never denied: the test proves nothing";

  // No permit of a user was spent by a request the global limit denied: each user's key holds
  // exactly what the model holds after that user's admissions alone.
  const auto policy = detail::CompiledPolicy::compile(Policy::of(per_user));
  Limiter reader(client(), Policy::of(per_user), {.name = "claims-user"});
  for (int user = 0; user < users; ++user) {
    auto& admits = of_user[static_cast<std::size_t>(user)];
    const test::CheckResult check = test::check_admits(per_user, admits);
    EXPECT_TRUE(check) << "user " << user << ": " << check.description;
    std::sort(admits.begin(), admits.end(),
              [](const test::Admit& a, const test::Admit& b) { return a.time_us < b.time_us; });
    std::vector<std::optional<detail::LimitState>> states(1);
    for (const test::Admit& admit : admits) {
      detail::decide_policy(policy->specs(), states, admit.time_us, 1, detail::Mode::acquire);
    }
    const Decision stored = run(loop(), reader.peek("u" + std::to_string(user)));
    const detail::PolicyOutcome model = detail::decide_policy(
        policy->specs(), states, stored.server_time_us, 1, detail::Mode::peek);
    EXPECT_EQ(stored.remaining, model.binding_outcome().remaining) << "user " << user;
    EXPECT_EQ(stored.reset_after.count(), model.binding_outcome().reset_after_us)
        << "user " << user << ": its key holds more than its admissions";
  }
  std::printf(
      "[ claims ] %zu admitted by %d processes for %d users; %ld denied by the global "
      "limit\n",
      all.size(), processes, users, denied_by_global);
}

TEST_F(ClaimsTest, ProcessesWaitingInAcquireAllNeverExceedEitherLimit) {
  // The same limits and load, each request waiting up to 200 ms: acquire_all reserves on both
  // keys at one slot, and is admitted there.
  constexpr int processes = 3;
  constexpr int users = 8;
  std::vector<pid_t> pids;
  std::vector<std::string> outputs;
  for (int i = 0; i < processes; ++i) {
    outputs.push_back(server_.dir() + "/waiting-" + std::to_string(i) + ".txt");
    pids.push_back(
        test::start_process({claims_hammer_binary(), server_.url(), std::to_string(users), "16",
                             "2000", "200", outputs.back(), "wait"}));
  }
  for (const pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a claims_hammer failed";
  }
  std::vector<test::Admit> all;
  std::vector<std::vector<test::Admit>> of_user(users);
  for (const std::string& output : outputs) {
    std::ifstream in(output);
    std::string line;
    while (std::getline(in, line)) {
      if (line.starts_with("#")) continue;
      std::istringstream fields(line);
      std::int64_t time = 0;
      int user = 0;
      fields >> time >> user;
      all.push_back({time, 1});
      of_user.at(static_cast<std::size_t>(user)).push_back({time, 1});
    }
  }
  const test::CheckResult global_check = test::check_admits(Limit::gcra({100, 1s}, 10), all);
  EXPECT_TRUE(global_check) << "global: " << global_check.description;
  for (int user = 0; user < users; ++user) {
    const test::CheckResult check =
        test::check_admits(Limit::gcra({20, 1s}, 5), of_user[static_cast<std::size_t>(user)]);
    EXPECT_TRUE(check) << "user " << user << ": " << check.description;
  }
  EXPECT_GT(all.size(), 150u) << "waiting, the global limit's 100/s is mostly used";
  std::printf("[ claims ] %zu admitted by %d processes waiting in acquire_all\n", all.size(),
              processes);
}

}  // namespace
}  // namespace redlimit
