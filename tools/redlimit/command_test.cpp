// The redlimit command, run as a process against a private redis-server: what each subcommand
// prints (tables and --json), what it changes, and its exit statuses.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "exit_status.hpp"
#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/runtime.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"
#include "support/sentinel_group.hpp"
#include "support/tls_redis_server.hpp"

namespace redlimit_cli {
namespace {

using namespace std::chrono_literals;
using JsonValue = nlohmann::json;

/// The command under test: $REDLIMIT_COMMAND (set by meson), else "redlimit".
std::string command_path() {
  const char* path = std::getenv("REDLIMIT_COMMAND");
  return path != nullptr ? path : "redlimit";
}

/// How a run of the command ended.
struct Outcome {
  int status = -1;
  std::string out;
  std::string err;
};

/// A run of the command in progress: its PID and the read ends of its stdout and stderr.
struct Started {
  pid_t pid = -1;
  int out = -1;
  int err = -1;
};

/// Starts the command with `args`, its environment plus `env` (NAME=VALUE entries) and without
/// REDLIMIT_URL unless `env` sets it.
Started start(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  std::array<int, 2> out{};
  std::array<int, 2> err{};
  if (pipe(out.data()) != 0 || pipe(err.data()) != 0) throw std::runtime_error("pipe failed");
  std::vector<std::string> words{command_path()};
  words.insert(words.end(), args.begin(), args.end());
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    for (const int fd : {out[0], out[1], err[0], err[1]})
      close(fd);
    unsetenv("REDLIMIT_URL");
    for (const std::string& entry : env)
      putenv(const_cast<char*>(entry.c_str()));
    std::vector<char*> argv;
    for (std::string& word : words)
      argv.push_back(word.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  return {pid, out[0], err[0]};
}

/// Reads the run's output until it ends, and its exit status.
Outcome finish(Started run) {
  Outcome outcome;
  std::array<pollfd, 2> fds{pollfd{run.out, POLLIN, 0}, pollfd{run.err, POLLIN, 0}};
  std::array<std::string*, 2> into{&outcome.out, &outcome.err};
  int open = 2;
  while (open > 0) {
    if (poll(fds.data(), fds.size(), 30'000) <= 0) {
      // Why kill: a command that hangs must fail this test, not wait for meson's timeout.
      ADD_FAILURE() << "the command printed nothing for 30 s; killed";
      kill(run.pid, SIGKILL);
      break;
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t got = read(fds[i].fd, buffer, sizeof buffer);
      if (got > 0) {
        into[i]->append(buffer, static_cast<std::size_t>(got));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  int status = 0;
  waitpid(run.pid, &status, 0);
  outcome.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return outcome;
}

/// Reads `run`'s stdout until its first line has come (30 s at most), and returns what was read.
std::string read_first_line(const Started& run) {
  std::string out;
  pollfd fd{run.out, POLLIN, 0};
  while (out.find('\n') == std::string::npos && poll(&fd, 1, 30'000) > 0) {
    char buffer[4096];
    const ssize_t got = read(run.out, buffer, sizeof buffer);
    if (got <= 0) break;
    out.append(buffer, static_cast<std::size_t>(got));
  }
  return out;
}

Outcome run_command(const std::vector<std::string>& args,
                    const std::vector<std::string>& env = {}) {
  return finish(start(args, env));
}

::testing::AssertionResult has(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << part << "' is not in:\n" << text;
}

/// A private redis-server, the command pointed at it, and a client for the test's own limiters.
class CommandTest : public redlimit::test::LoopTest {
 protected:
  void TearDown() override {
    redlimit::run(loop(), client_.close());
    LoopTest::TearDown();
  }

  /// The command with --url of the server first.
  Outcome redlimit(std::vector<std::string> args) {
    args.insert(args.begin(), {"--url", server_.url()});
    return run_command(args);
  }
  Started start_redlimit(std::vector<std::string> args) {
    args.insert(args.begin(), {"--url", server_.url()});
    return start(args);
  }
  /// The command's --json output, parsed.
  JsonValue json_of(std::vector<std::string> args, int expected_status = exit_ok) {
    args.push_back("--json");
    const Outcome outcome = redlimit(args);
    EXPECT_EQ(outcome.status, expected_status) << outcome.err;
    return nlohmann::json::parse(outcome.out);
  }

  /// A limiter that follows the policy stored under `name`.
  redlimit::Limiter follower(const std::string& name) {
    return redlimit::Limiter(client_,
                             redlimit::LimiterOptions{.name = name, .policy_refresh = 100ms});
  }
  /// `count` permits for `key`, one by one; returns the decisions allowed.
  int take(redlimit::Limiter& limiter, const std::string& key, int count) {
    int allowed = 0;
    for (int i = 0; i < count; ++i)
      allowed += redlimit::run(loop(), limiter.try_acquire(key)).allowed ? 1 : 0;
    return allowed;
  }

  redlimit::test::RedisServer server_;
  redlimit::Client client_{loop(), redlimit::ClientOptions{.url = server_.url()}};
};

TEST_F(CommandTest, PolicySetThenGetShowsThePolicyItsVersionAndCarry) {
  const Outcome set = redlimit({"policy", "set", "sms", "gcra 10/s burst 20; fixed_window 1000/day",
                                "--carry", "proportional"});
  EXPECT_EQ(set.status, exit_ok) << set.err;
  EXPECT_TRUE(has(set.out, "gcra 10/1s burst 20; fixed_window 1000/1d"));

  const Outcome get = redlimit({"policy", "get", "sms"});
  EXPECT_EQ(get.status, exit_ok) << get.err;
  EXPECT_TRUE(has(get.out, "policy     gcra 10/1s burst 20; fixed_window 1000/1d\n"));
  EXPECT_TRUE(has(get.out, "carry      proportional\n"));
  EXPECT_TRUE(has(get.out, "overrides  none\n"));

  const JsonValue json = json_of({"policy", "get", "sms"});
  EXPECT_EQ(json.at("name").get<std::string>(), "sms");
  EXPECT_EQ(json.at("policy").at("text").get<std::string>(),
            "gcra 10/1s burst 20; fixed_window 1000/1d");
  EXPECT_EQ(json.at("policy").at("carry").get<std::string>(), "proportional");
  EXPECT_GT(json.at("policy").at("version").get<double>(), 0);
  EXPECT_EQ(json.at("policy").at("version").get<double>(), json.at("version").get<double>());
  EXPECT_TRUE(json.at("policy").at("since").get<std::string>().ends_with("Z"));
  const auto since_us = static_cast<std::int64_t>(json.at("policy").at("since_us").get<double>());
  const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  EXPECT_LT(std::abs(now_us - since_us), 60'000'000);
  EXPECT_TRUE(json.at("overrides").empty());
}

TEST_F(CommandTest, PolicyGetOfANameWithoutAPolicyExits1) {
  const Outcome get = redlimit({"policy", "get", "nothing"});
  EXPECT_EQ(get.status, exit_not_found);
  EXPECT_TRUE(has(get.err, "no policy is stored under nothing"));
  EXPECT_TRUE(json_of({"policy", "get", "nothing"}, exit_not_found).at("policy").is_null());
}

TEST_F(CommandTest, TrySetStoresOnlyWhenNoPolicyIsStored) {
  EXPECT_EQ(redlimit({"policy", "try-set", "sms", "gcra 10/s"}).status, exit_ok);
  const Outcome second = redlimit({"policy", "try-set", "sms", "gcra 99/s"});
  EXPECT_EQ(second.status, exit_not_found);
  EXPECT_TRUE(has(second.err, "already has a policy"));
  EXPECT_FALSE(
      json_of({"policy", "try-set", "sms", "gcra 99/s"}, exit_not_found).at("stored").get<bool>());
  EXPECT_EQ(json_of({"policy", "get", "sms"}).at("policy").at("text").get<std::string>(),
            "gcra 10/1s");
}

TEST_F(CommandTest, RemoveDeletesThePolicyAndExits1WhenNothingIsStored) {
  ASSERT_EQ(redlimit({"policy", "set", "sms", "gcra 10/s"}).status, exit_ok);
  ASSERT_EQ(redlimit({"override", "set", "sms", "vip", "gcra 100/s"}).status, exit_ok);
  EXPECT_TRUE(json_of({"policy", "remove", "sms"}).at("removed").get<bool>());
  EXPECT_EQ(redlimit({"policy", "get", "sms"}).status, exit_not_found);
  EXPECT_FALSE(json_of({"policy", "remove", "sms"}, exit_not_found).at("removed").get<bool>());
}

TEST_F(CommandTest, AFollowingLimiterTakesThePolicySetByTheCommand) {
  redlimit::Limiter limiter = follower("api");
  EXPECT_THROW(redlimit::run(loop(), limiter.try_acquire("alice")), redlimit::PolicyNotFound);

  ASSERT_EQ(redlimit({"policy", "set", "api", "fixed_window 3/min anchored"}).status, exit_ok);
  // The change's notice reaches the limiter while its loop runs (peek() consumes nothing).
  const auto found_by = std::chrono::steady_clock::now() + 3s;
  for (;;) {
    try {
      redlimit::run(loop(), limiter.peek("alice"));
      break;
    } catch (const redlimit::PolicyNotFound&) {
      ASSERT_LT(std::chrono::steady_clock::now(), found_by) << "the policy never reached it";
      redlimit::run(loop(), redlimit::sleep_for(loop(), 20ms));
    }
  }
  EXPECT_EQ(take(limiter, "alice", 5), 3);

  ASSERT_EQ(redlimit({"policy", "set", "api", "fixed_window 10/min anchored"}).status, exit_ok);
  const auto version =
      static_cast<std::int64_t>(json_of({"policy", "get", "api"}).at("version").get<double>());
  // Within a round trip of the change's notice, and at worst policy_refresh (100 ms).
  const auto deadline = std::chrono::steady_clock::now() + 3s;
  redlimit::Decision decision;
  do {
    decision = redlimit::run(loop(), limiter.try_acquire("alice"));
  } while (decision.limit != 10 && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(decision.limit, 10);
  EXPECT_EQ(decision.policy_version, version);
}

TEST_F(CommandTest, AnOverrideIsSetFollowedAndRemoved) {
  ASSERT_EQ(redlimit({"policy", "set", "api", "fixed_window 2/min anchored"}).status, exit_ok);
  const Outcome set = redlimit({"override", "set", "api", "vip", "fixed_window 50/min anchored"});
  EXPECT_EQ(set.status, exit_ok) << set.err;

  const JsonValue stored = json_of({"policy", "get", "api"});
  ASSERT_EQ(stored.at("overrides").size(), 1u);
  EXPECT_EQ(stored.at("overrides").at(0).at("key").get<std::string>(), "vip");
  EXPECT_EQ(stored.at("overrides").at(0).at("policy").get<std::string>(),
            "fixed_window 50/1min anchored");
  EXPECT_TRUE(has(redlimit({"policy", "get", "api"}).out, "vip  fixed_window 50/1min anchored"));

  redlimit::Limiter limiter = follower("api");
  EXPECT_EQ(redlimit::run(loop(), limiter.try_acquire("vip")).limit, 50);
  EXPECT_EQ(redlimit::run(loop(), limiter.try_acquire("someone")).limit, 2);

  EXPECT_TRUE(json_of({"override", "remove", "api", "vip"}).at("removed").get<bool>());
  const Outcome again = redlimit({"override", "remove", "api", "vip"});
  EXPECT_EQ(again.status, exit_not_found);
  EXPECT_TRUE(has(again.err, "api has no override for key vip"));
  const JsonValue after = json_of({"policy", "get", "api"});
  EXPECT_TRUE(after.at("overrides").empty());
  EXPECT_EQ(after.at("removed_overrides").at(0).at("key").get<std::string>(), "vip");
}

TEST_F(CommandTest, InspectShowsEveryLimitAfterDecisionsAndConsumesNothing) {
  // Why these limits: neither gives a permit back within the test (no refill, no window end).
  ASSERT_EQ(redlimit({"policy", "set", "shop", "gcra 1/h burst 20; fixed_window 100/day anchored"})
                .status,
            exit_ok);
  redlimit::Limiter limiter = follower("shop");
  ASSERT_EQ(take(limiter, "alice", 4), 4);

  for (int twice = 0; twice < 2; ++twice) {
    const JsonValue json = json_of({"inspect", "shop", "alice"});
    EXPECT_TRUE(json.at("allowed").get<bool>());
    ASSERT_EQ(json.at("limits").size(), 2u);
    EXPECT_EQ(json.at("limits").at(0).at("limit").get<std::string>(), "gcra 1/1h burst 20");
    EXPECT_EQ(json.at("limits").at(0).at("remaining").get<double>(), 16);
    EXPECT_EQ(json.at("limits").at(0).at("capacity").get<double>(), 20);
    EXPECT_EQ(json.at("limits").at(1).at("remaining").get<double>(), 96);
    EXPECT_EQ(json.at("limits").at(1).at("capacity").get<double>(), 100);
    EXPECT_EQ(json.at("limits").at(1).at("retry_after_us").get<double>(), 0);
    EXPECT_GT(json.at("limits").at(1).at("ttl_ms").get<double>(), 0);
    EXPECT_EQ(json.at("limits").at(1).at("redis_key").get<std::string>(),
              "rl:{shop:alice}:fixed_window:1");
  }
  const Outcome table = redlimit({"inspect", "shop", "alice"});
  EXPECT_EQ(table.status, exit_ok);
  EXPECT_TRUE(has(table.out, "next request    allowed"));
  EXPECT_TRUE(has(table.out, "rl:{shop:alice}:gcra:0"));

  ASSERT_EQ(take(limiter, "alice", 16), 16);
  const JsonValue exhausted = json_of({"inspect", "shop", "alice"}, exit_not_found);
  EXPECT_FALSE(exhausted.at("allowed").get<bool>());
  EXPECT_EQ(exhausted.at("limits").at(0).at("remaining").get<double>(), 0);
  EXPECT_GT(exhausted.at("limits").at(0).at("retry_after_us").get<double>(), 0);
  EXPECT_TRUE(exhausted.at("limits").at(1).at("allowed").get<bool>());
  EXPECT_EQ(redlimit({"inspect", "shop", "alice"}).status, exit_not_found);
}

TEST_F(CommandTest, ResetMakesTheKeyFullAgain) {
  ASSERT_EQ(redlimit({"policy", "set", "shop", "fixed_window 5/min anchored"}).status, exit_ok);
  redlimit::Limiter limiter = follower("shop");
  ASSERT_EQ(take(limiter, "bob", 5), 5);
  EXPECT_EQ(redlimit({"inspect", "shop", "bob"}).status, exit_not_found);

  const Outcome reset = redlimit({"reset", "shop", "bob"});
  EXPECT_EQ(reset.status, exit_ok) << reset.err;
  const JsonValue json = json_of({"inspect", "shop", "bob"});
  EXPECT_EQ(json.at("limits").at(0).at("remaining").get<double>(), 5);
  EXPECT_TRUE(json.at("limits").at(0).at("ttl_ms").is_null());
}

// Found in review (not named by an issue): under a per_client policy each client has its own
// state, and inspect and reset read and reset the command's own (always full, never used),
// saying nothing of it.
TEST_F(CommandTest, InspectAndResetUnderAPerClientPolicyNeedTheClientsId) {
  ASSERT_EQ(
      redlimit({"policy", "set", "pc", "fixed_window 5/min anchored; scope per_client"}).status,
      exit_ok);
  redlimit::Client app(loop(), redlimit::ClientOptions{.url = server_.url(), .id = "app-1"});
  {
    redlimit::Limiter limiter(app, redlimit::LimiterOptions{.name = "pc"});
    ASSERT_EQ(take(limiter, "k", 5), 5);
  }
  for (const char* command : {"inspect", "reset"}) {
    const Outcome refused = redlimit({command, "pc", "k"});
    EXPECT_EQ(refused.status, exit_usage) << command;
    EXPECT_TRUE(has(refused.err, "--client-id")) << refused.err;
  }
  const JsonValue used = json_of({"inspect", "pc", "k", "--client-id", "app-1"}, exit_not_found);
  EXPECT_EQ(used.at("limits").at(0).at("remaining").get<double>(), 0);
  EXPECT_EQ(redlimit({"reset", "pc", "k", "--client-id", "app-1"}).status, exit_ok);
  const JsonValue full = json_of({"inspect", "pc", "k", "--client-id", "app-1"});
  EXPECT_EQ(full.at("limits").at(0).at("remaining").get<double>(), 5);
  redlimit::run(loop(), app.close());
}

// Found in review (not named by an issue): output that could not be written was not noticed,
// and a script saw success without the JSON it asked for.
TEST_F(CommandTest, OutputThatCannotBeWrittenIsAFailure) {
  ASSERT_EQ(redlimit({"policy", "set", "sms", "gcra 10/s"}).status, exit_ok);
  const std::string line = command_path() + " --url '" + server_.url() +
                           "' policy get sms --json >/dev/full 2>/dev/null";
  const int status = std::system(line.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), exit_failed);
}

TEST_F(CommandTest, InspectAndResetOfANameWithoutAPolicyExit1) {
  EXPECT_EQ(redlimit({"inspect", "nothing", "k"}).status, exit_not_found);
  EXPECT_EQ(redlimit({"reset", "nothing", "k"}).status, exit_not_found);
}

TEST_F(CommandTest, TopListsTheKeysNearestTheirLimitsFirst) {
  ASSERT_EQ(redlimit({"policy", "set", "api", "fixed_window 10/min anchored"}).status, exit_ok);
  redlimit::Limiter limiter = follower("api");
  take(limiter, "nine", 9);
  take(limiter, "two", 2);
  take(limiter, "five", 5);
  take(limiter, "all:of\x01them", 10);

  const JsonValue json = json_of({"top", "api"});
  EXPECT_EQ(json.at("sampled").get<double>(), 4);
  EXPECT_TRUE(json.at("complete").get<bool>());
  std::vector<std::string> keys;
  for (const JsonValue& key : json.at("keys"))
    keys.push_back(key.at("key").get<std::string>());
  EXPECT_EQ(keys, (std::vector<std::string>{"all:of\x01them", "nine", "five", "two"}));
  EXPECT_EQ(json.at("keys").at(1).at("remaining").get<double>(), 1);
  EXPECT_EQ(json.at("keys").at(1).at("capacity").get<double>(), 10);
  EXPECT_EQ(json.at("keys").at(1).at("limit").get<std::string>(), "fixed_window 10/1min anchored");
  EXPECT_FALSE(json.at("keys").at(0).at("allowed").get<bool>());

  const Outcome table = redlimit({"top", "api", "--count", "2"});
  EXPECT_EQ(table.status, exit_ok);
  EXPECT_TRUE(has(table.out, "all:of\\x01them"));  // never a raw control byte on a terminal
  EXPECT_TRUE(has(table.out, "nine"));
  EXPECT_EQ(table.out.find("five"), std::string::npos);
}

// Found in review (not named by an issue): the share used was computed in floating point and
// rounded down below its true value (1 of 10 used showed 9%).
TEST_F(CommandTest, TopShowsTheShareOfTheLimitUsedExactly) {
  ASSERT_EQ(redlimit({"policy", "set", "api", "fixed_window 10/min anchored"}).status, exit_ok);
  redlimit::Limiter limiter = follower("api");
  take(limiter, "one", 1);
  take(limiter, "two", 2);
  const Outcome table = redlimit({"top", "api"});
  EXPECT_EQ(table.status, exit_ok);
  EXPECT_TRUE(has(table.out, " 10%")) << table.out;
  EXPECT_TRUE(has(table.out, " 20%")) << table.out;
}

TEST_F(CommandTest, TopOfANameWithGlobCharactersSamplesOnlyItsOwnKeys) {
  ASSERT_EQ(redlimit({"policy", "set", "a*", "fixed_window 10/min anchored"}).status, exit_ok);
  ASSERT_EQ(redlimit({"policy", "set", "ab", "fixed_window 10/min anchored"}).status, exit_ok);
  redlimit::Limiter star = follower("a*");
  redlimit::Limiter other = follower("ab");
  take(star, "mine", 1);
  take(other, "not-mine", 1);
  const JsonValue json = json_of({"top", "a*", "--sample", "10"});
  ASSERT_EQ(json.at("keys").size(), 1u);
  EXPECT_EQ(json.at("keys").at(0).at("key").get<std::string>(), "mine");
}

TEST_F(CommandTest, TopSamplesAtMostSampleKeys) {
  ASSERT_EQ(redlimit({"policy", "set", "api", "fixed_window 10/min anchored"}).status, exit_ok);
  redlimit::Limiter limiter = follower("api");
  for (int i = 0; i < 30; ++i)
    take(limiter, "k" + std::to_string(i), 1);
  const JsonValue json = json_of({"top", "api", "--sample", "7", "--count", "100"});
  EXPECT_EQ(json.at("sampled").get<double>(), 7);
  EXPECT_FALSE(json.at("complete").get<bool>());
  EXPECT_EQ(json.at("keys").size(), 7u);
}

// Found in review (not named by an issue): a Ctrl-C while SCAN had found no key yet ended the
// sample early and reported it as an incomplete sample, `"interrupted": false`.
TEST_F(CommandTest, TopStoppedDuringItsScanSaysItWasInterrupted) {
  ASSERT_EQ(redlimit({"policy", "set", "api", "fixed_window 10/min anchored"}).status, exit_ok);
  // A million other keys: a thousand SCAN calls before the scan could end by itself.
  server_.command({"DEBUG", "POPULATE", "1000000", "other"});
  const Started top = start_redlimit({"top", "api", "--json", "--scan-limit", "10000000"});
  // Its signal handlers are in place before its first command: stop it once it scans, with
  // Redis held still meanwhile so that the scan is where it was seen.
  const auto scanning = [&] {
    return server_.command({"CLIENT", "LIST"}).str.find("cmd=scan") != std::string::npos;
  };
  const auto give_up = std::chrono::steady_clock::now() + 30s;
  while (!scanning() && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(1ms);
  server_.pause();
  kill(top.pid, SIGINT);
  server_.resume();
  const Outcome outcome = finish(top);
  ASSERT_EQ(outcome.status, exit_ok) << outcome.err;
  const JsonValue json = nlohmann::json::parse(outcome.out);
  EXPECT_TRUE(json.at("interrupted").get<bool>()) << outcome.out;
  EXPECT_FALSE(json.at("complete").get<bool>()) << outcome.out;
  EXPECT_EQ(json.at("sampled").get<double>(), 0);

  const Outcome table = redlimit({"top", "api", "--scan-limit", "1000"});
  EXPECT_TRUE(has(table.out, "(a sample")) << "a scan bounded by --scan-limit is a sample";
}

TEST_F(CommandTest, WatchOnceShowsTheFleetsDecisionsPerSecond) {
  ASSERT_EQ(redlimit({"policy", "set", "load", "fixed_window 50/min anchored"}).status, exit_ok);
  redlimit::Client publisher(
      loop(), redlimit::ClientOptions{.url = server_.url(), .stats_interval = 100ms});
  {
    redlimit::Limiter limiter(publisher, redlimit::LimiterOptions{.name = "load"});
    const Started named = start_redlimit({"watch", "load", "--once", "--json", "--interval", "1s"});
    const Started all = start_redlimit({"watch", "--once", "--json", "--interval", "1s"});
    // Decisions during the whole interval, some denied (50 per key and minute).
    int made = 0;
    const auto until = std::chrono::steady_clock::now() + 1500ms;
    while (std::chrono::steady_clock::now() < until) {
      for (int i = 0; i < 20; ++i, ++made)
        redlimit::run(loop(), limiter.try_acquire("k" + std::to_string(i % 2)));
      redlimit::run(loop(), redlimit::sleep_for(loop(), 20ms));
    }
    for (const Started& watcher : {named, all}) {
      const Outcome outcome = finish(watcher);
      ASSERT_EQ(outcome.status, exit_ok) << outcome.err;
      EXPECT_EQ(outcome.out.find('\n'), outcome.out.size() - 1) << "one line: " << outcome.out;
      const JsonValue json = nlohmann::json::parse(outcome.out);
      EXPECT_NEAR(json.at("interval_s").get<double>(), 1.0, 0.5);
      ASSERT_EQ(json.at("limiters").size(), 1u);
      const JsonValue& load = json.at("limiters").at(0);
      EXPECT_EQ(load.at("name").get<std::string>(), "load");
      EXPECT_GT(load.at("decisions_per_s").get<double>(), 0);
      EXPECT_GT(load.at("denied_per_s").get<double>(), 0);
      EXPECT_GT(load.at("denied_percent").get<double>(), 0);
      EXPECT_EQ(load.at("failure_policy_per_s").get<double>(), 0);
      const double total = load.at("totals").at("allowed").get<double>() +
                           load.at("totals").at("denied").get<double>();
      EXPECT_GT(total, 0);
      EXPECT_LE(total, made);
      EXPECT_EQ(json.at("total").at("totals").at("allowed").get<double>(),
                load.at("totals").at("allowed").get<double>());
    }
    // Every decision counted once its client has published.
    redlimit::run(loop(), redlimit::sleep_for(loop(), 400ms));
    const Outcome quiet = redlimit({"watch", "load", "--once", "--json", "--interval", "100ms"});
    const JsonValue json = nlohmann::json::parse(quiet.out);
    const JsonValue& load = json.at("limiters").at(0);
    EXPECT_EQ(load.at("totals").at("allowed").get<double>(), 100);
    EXPECT_EQ(load.at("totals").at("allowed").get<double>() +
                  load.at("totals").at("denied").get<double>(),
              made);
    EXPECT_EQ(load.at("decisions_per_s").get<double>(), 0);
    EXPECT_TRUE(load.at("denied_percent").is_null());
  }
  redlimit::run(loop(), publisher.close());
}

TEST_F(CommandTest, WatchShowsANamedLimiterWithoutCountsAsZeros) {
  const Outcome outcome = redlimit({"watch", "idle", "--once", "--interval", "100ms"});
  EXPECT_EQ(outcome.status, exit_ok) << outcome.err;
  EXPECT_TRUE(has(outcome.out, "NAME"));
  EXPECT_TRUE(has(outcome.out, "idle"));
  EXPECT_TRUE(has(outcome.out, "(all)"));
  EXPECT_TRUE(has(outcome.out, "ClientOptions::stats_interval")) << "how to have counts";
}

TEST_F(CommandTest, BadArgumentsAndBadPoliciesExit2) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"policy", "set", "sms", "gcra ten/s"},
        std::vector<std::string>{"policy", "set", "sms", "gcra 10/s", "--carry", "some"},
        std::vector<std::string>{"override", "set", "sms", "k", "bucket 1/s"},
        std::vector<std::string>{"inspect", "sms"}, std::vector<std::string>{"frobnicate"},
        std::vector<std::string>{}}) {
    const Outcome outcome = redlimit(args);
    EXPECT_EQ(outcome.status, exit_usage) << outcome.err;
    EXPECT_FALSE(outcome.err.empty());
  }
  // Text that parses, values a limiter refuses: refused before anything is stored.
  const Outcome values = redlimit({"policy", "set", "sms", "sliding_window_log 50000/s"});
  EXPECT_EQ(values.status, exit_usage) << values.out;
  EXPECT_EQ(redlimit({"policy", "get", "sms"}).status, exit_not_found);
  EXPECT_EQ(redlimit({"--prefix", "bad prefix", "inspect", "sms", "k"}).status, exit_usage);
  EXPECT_EQ(redlimit({"--prefix", "bad prefix", "watch", "--once"}).status, exit_usage);
  EXPECT_EQ(run_command({"--url", "redis://127.0.0.1:notaport", "policy", "get", "x"}).status,
            exit_usage);
}

TEST_F(CommandTest, HelpExits0) {
  const Outcome help = redlimit({"--help"});
  EXPECT_EQ(help.status, exit_ok);
  EXPECT_TRUE(has(help.out, "inspect"));
}

TEST_F(CommandTest, AnUnreachableRedisExits3) {
  const std::string url = "redis://127.0.0.1:" + std::to_string(redlimit::test::free_port());
  // Issue 33, bug 6: inspect and reset read the stored policy first, and an unreadable store
  // was reported as "not found" (exit 1).
  for (const std::vector<std::string>& command : {std::vector<std::string>{"policy", "get", "sms"},
                                                  {"inspect", "sms", "k"},
                                                  {"reset", "sms", "k"}}) {
    std::vector<std::string> args{"--url", url};
    args.insert(args.end(), command.begin(), command.end());
    const Outcome outcome = run_command(args);
    EXPECT_EQ(outcome.status, exit_unavailable) << command[0] << ": " << outcome.err;
    EXPECT_TRUE(has(outcome.err, "did not answer")) << command[0] << ": " << outcome.err;
  }
}

// Found in review (not named by an issue): these read Redis before they checked their name or
// key, so an empty one was reported as Redis not answering (3) or as not found (1).
TEST_F(CommandTest, AnEmptyNameOrKeyIsAUsageErrorBeforeAnyIo) {
  const std::string url = "redis://127.0.0.1:" + std::to_string(redlimit::test::free_port());
  for (const std::vector<std::string>& command : {std::vector<std::string>{"top", ""},
                                                  {"inspect", "sms", ""},
                                                  {"reset", "sms", ""},
                                                  {"override", "remove", "sms", ""}}) {
    std::vector<std::string> args{"--url", url};
    args.insert(args.end(), command.begin(), command.end());
    const Outcome outcome = run_command(args);
    EXPECT_EQ(outcome.status, exit_usage) << command[0] << ": " << outcome.err;
  }
}

TEST_F(CommandTest, TopIsRefusedOnAClusterUrlWhereSCANWouldRunPerNode) {
  const std::string url =
      "redis-cluster://127.0.0.1:" + std::to_string(redlimit::test::free_port());
  const Outcome top = run_command({"--url", url, "top", "api"});
  EXPECT_EQ(top.status, exit_usage);
  EXPECT_TRUE(has(top.err, "Redis Cluster"));
}

TEST_F(CommandTest, WatchEndsWithStatus0OnSigint) {
  redlimit::Client publisher(
      loop(), redlimit::ClientOptions{.url = server_.url(), .stats_interval = 100ms});
  {
    redlimit::Limiter limiter(publisher, redlimit::Policy::parse("gcra 100/s"),
                              redlimit::LimiterOptions{.name = "busy"});
    redlimit::run(loop(), limiter.try_acquire("k"));
    redlimit::run(loop(), redlimit::sleep_for(loop(), 300ms));  // published
    const Started watch = start_redlimit({"watch", "--json", "--interval", "100ms"});
    // Ctrl-C once it has shown a refresh (its signal handlers are in place by then).
    const std::string first = read_first_line(watch);
    kill(watch.pid, SIGINT);
    const Outcome outcome = finish(watch);
    EXPECT_EQ(outcome.status, exit_ok) << outcome.err;
    EXPECT_TRUE(has(first, "\"busy\"")) << "the name its client published is listed";
  }
  redlimit::run(loop(), publisher.close());
}

TEST(TlsCommandTest, ARedissUrlWorksWithTheServersCaAndFailsTypedWithout) {
  redlimit::test::TlsRedisServer tls;
  const Outcome stored = run_command(
      {"--url", tls.url(), "--tls-ca", tls.certificates().ca, "policy", "set", "sms", "gcra 10/s"});
  EXPECT_EQ(stored.status, exit_ok) << stored.err;
  const Outcome read =
      run_command({"policy", "get", "sms", "--json", "--tls-ca", tls.certificates().ca},
                  {"REDLIMIT_URL=" + tls.url()});
  EXPECT_EQ(read.status, exit_ok) << read.err;
  EXPECT_EQ(nlohmann::json::parse(read.out).at("policy").at("text").get<std::string>(),
            "gcra 10/1s");
  // The test CA is not among the system's: the server's certificate does not verify.
  const Outcome unverified = run_command({"--url", tls.url(), "policy", "get", "sms"});
  EXPECT_EQ(unverified.status, exit_unavailable);
  EXPECT_TRUE(has(unverified.err, "did not verify"));
  const Outcome missing =
      run_command({"--url", tls.url(), "--tls-ca", "/nonexistent/ca.pem", "policy", "get", "sms"});
  EXPECT_EQ(missing.status, exit_usage);
  EXPECT_TRUE(has(missing.err, "/nonexistent/ca.pem"));
}

TEST(SentinelCommandTest, ASentinelUrlReachesThePrimaryWithTheSentinelsPasswordFromTheEnvironment) {
  redlimit::test::SentinelGroup group({.sentinel_password = "sentinel-pw"});
  const Outcome stored = run_command({"--url", group.url(), "policy", "set", "sms", "gcra 10/s"},
                                     {"REDLIMIT_SENTINEL_PASSWORD=sentinel-pw"});
  EXPECT_EQ(stored.status, exit_ok) << stored.err;
  EXPECT_FALSE(group.primary().command({"HGETALL", "rl:policy:{sms}"}).elements.empty());
  const Outcome refused = run_command({"--url", group.url(), "policy", "get", "sms"});
  EXPECT_NE(refused.status, exit_ok);
  EXPECT_TRUE(has(refused.err, "NOAUTH"));
  EXPECT_FALSE(has(refused.err + refused.out, "sentinel-pw"));
}

TEST_F(CommandTest, TheUrlComesFromREDLIMIT_URLWhenNotGiven) {
  ASSERT_EQ(redlimit({"policy", "set", "sms", "gcra 10/s"}).status, exit_ok);
  const Outcome outcome = run_command({"policy", "get", "sms"}, {"REDLIMIT_URL=" + server_.url()});
  EXPECT_EQ(outcome.status, exit_ok) << outcome.err;
  EXPECT_TRUE(has(outcome.out, "gcra 10/1s"));
}

/// A server that requires a password.
class PasswordTest : public ::testing::Test {
 protected:
  static constexpr const char* password = "s3cret-Passw0rd";
  std::string url(const std::string& credentials, int port) const {
    return "redis://" + credentials + "@127.0.0.1:" + std::to_string(port);
  }
  redlimit::test::RedisServer server_{{"--requirepass", password}};
};

TEST_F(PasswordTest, APasswordNeverAppearsInOutputOrErrors) {
  const std::string right = url(std::string("default:") + password, server_.port());
  const std::string only_password = url(password, server_.port());
  const std::string unreachable = url(password, redlimit::test::free_port());
  const std::string wrong = url("default:wrong-Passw0rd-9", server_.port());
  const std::vector<std::pair<std::vector<std::string>, int>> runs{
      {{"--url", right, "policy", "set", "sms", "gcra 10/s"}, exit_ok},
      {{"--url", only_password, "policy", "get", "sms"}, exit_ok},
      {{"--url", right, "watch", "--once", "--interval", "100ms"}, exit_ok},
      {{"--url", right, "watch", "--once", "--interval", "100ms", "--json"}, exit_ok},
      {{"--url", unreachable, "policy", "get", "sms"}, exit_unavailable},
      {{"--url", wrong, "inspect", "sms", "k"}, exit_unavailable},
      {{"--url", url(password, 0), "policy", "get", "sms"}, exit_usage},  // port 0: malformed
  };
  for (const auto& [args, status] : runs) {
    const Outcome outcome = run_command(args, {"REDLIMIT_URL=" + right});
    EXPECT_EQ(outcome.status, status) << args[1] << " " << args[2] << ": " << outcome.err;
    for (const std::string secret : {password, "wrong-Passw0rd-9"}) {
      EXPECT_EQ(outcome.out.find(secret), std::string::npos) << outcome.out;
      EXPECT_EQ(outcome.err.find(secret), std::string::npos) << outcome.err;
    }
  }
  const Outcome watch = run_command({"--url", right, "watch", "--once", "--interval", "100ms"});
  EXPECT_TRUE(has(watch.out, "redis://default:***@127.0.0.1:"));
  const Outcome refused = run_command({"--url", wrong, "policy", "get", "sms"});
  EXPECT_TRUE(has(refused.err, "redis://default:***@127.0.0.1:"));
}

}  // namespace
}  // namespace redlimit_cli
