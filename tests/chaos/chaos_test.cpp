// The seeded fault suite: a fleet of worker processes (worker.cpp) under load, a nemesis making
// faults from a seeded schedule, and the checker over everything logged. Two runs: on a private
// redis-server (every fault of one server), and on a primary with its replica and three
// sentinels, the workers with ClientOptions::replicas = 1 (failovers, primary kills, replica
// stalls), where the limits must hold across primaries as in one Redis lifetime.
//
// The seed: `--seed N`, else $REDLIMIT_CHAOS_SEED, else random; printed first; both runs use
// it. The same seed replays the same schedules. The length: `--seconds N`, else
// $REDLIMIT_CHAOS_SECONDS (meson option chaos_seconds), else 170; the replicated run takes half
// of it, at least 40 s (enough for one fault of each kind). Logs stay in chaos-<seed>/ (and
// chaos-replicated-<seed>/), in the working directory, when a check fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include "chaos/call_log.hpp"
#include "chaos/checker.hpp"
#include "chaos/fleet.hpp"
#include "chaos/nemesis.hpp"
#include "chaos/replicated_nemesis.hpp"
#include "chaos/sampler.hpp"
#include "support/acl_line.hpp"
#include "support/redis_server.hpp"
#include "support/sentinel_group.hpp"

namespace {

using namespace redlimit;
using namespace redlimit::chaos;
using namespace std::chrono_literals;

std::uint64_t seed_option = 0;
bool seed_given = false;
long seconds_option = 0;

constexpr int fleet_size = 3;

std::uint64_t pick_seed() {
  if (seed_given) return seed_option;
  if (const char* env = std::getenv("REDLIMIT_CHAOS_SEED"); env != nullptr && *env != '\0')
    return std::stoull(env);
  return std::random_device{}();
}

/// The seed of both runs.
std::uint64_t run_seed() {
  static const std::uint64_t seed = pick_seed();
  return seed;
}

long run_seconds() {
  if (seconds_option > 0) return seconds_option;
  if (const char* env = std::getenv("REDLIMIT_CHAOS_SECONDS"); env != nullptr && *env != '\0')
    return std::stol(env);
  return 170;
}

long replicated_run_seconds() {
  return std::max(40L, run_seconds() / 2);
}

std::string worker_binary() {
  const char* path = std::getenv("REDLIMIT_CHAOS_WORKER");
  return path != nullptr ? path : "chaos_worker";
}

/// The workers' least-privilege ACL user as configuration, so that a restart keeps it.
std::vector<std::string> acl_user_args() {
  std::vector<std::string> args = test::words(test::acl_setuser);
  args.erase(args.begin(), args.begin() + 2);  // "ACL SETUSER"
  args.insert(args.begin(), "--user");
  return args;
}

/// The faults as made, in seconds from the start, for reading the logs kept after a failure.
void write_faults(const RunRecord& run, const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) return;
  for (const FaultRun& fault : run.faults) {
    std::fprintf(file, "%s %.3f %.3f %d\n", std::string(to_string(fault.kind)).c_str(),
                 static_cast<double>(fault.start_ns - run.start_ns) / 1e9,
                 static_cast<double>(fault.end_ns - run.start_ns) / 1e9, fault.victim);
  }
  for (const Restart& restart : run.restarts)
    std::fprintf(file, "restart_kill_wall_us %lld\n", static_cast<long long>(restart.kill_wall_us));
  std::fprintf(file, "start_ns %lld\n", static_cast<long long>(run.start_ns));
  std::fclose(file);
}

/// Prints the seed and the schedule, and makes the run's log directory (empty).
void announce(const char* run_name, std::uint64_t seed, long seconds,
              const std::vector<Fault>& schedule, const std::string& log_dir) {
  std::printf("chaos (%s): seed %llu, %ld s (replay: --seed %llu or REDLIMIT_CHAOS_SEED=%llu)\n",
              run_name, static_cast<unsigned long long>(seed), seconds,
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  for (const Fault& fault : schedule) {
    std::printf("  %s %lld ms, gap %lld ms%s\n", std::string(to_string(fault.kind)).c_str(),
                static_cast<long long>(fault.length.count()),
                static_cast<long long>(fault.gap.count()),
                fault.victim >= 0 ? (", worker slot " + std::to_string(fault.victim)).c_str() : "");
  }
  std::fflush(stdout);
  std::filesystem::remove_all(log_dir);
  std::filesystem::create_directories(log_dir);
}

/// Runs `fleet` through `schedule`, each fault made by `inject`, sampling the workers (and
/// `redis`'s connections, if given); the record of the run.
RunRecord run_schedule(std::uint64_t seed, Fleet& fleet, const test::RedisServer* redis,
                       std::atomic<long long>& own_connections, const std::vector<Fault>& schedule,
                       const std::function<FaultRun(const Fault&)>& inject) {
  RunRecord run;
  run.seed = seed;
  run.fleet_size = fleet.size();
  run.start_ns = monotonic_ns();
  fleet.start();
  {
    Sampler sampler(redis, fleet, own_connections);
    std::this_thread::sleep_for(warmup);
    for (const Fault& fault : schedule) {
      run.faults.push_back(inject(fault));
      std::this_thread::sleep_for(fault.gap);
    }
    run.end_ns = monotonic_ns();
    fleet.stop(5000);
    sampler.finish(run.connections, run.processes);
  }
  run.workers = fleet.runs();
  return run;
}

/// Checks `run` with `options` and prints the summary; a failed check fails the test and keeps the
/// logs.
void check_and_report(const RunRecord& run, const std::string& log_dir,
                      const CheckOptions& options) {
  write_faults(run, log_dir + "/faults.txt");
  const CheckReport report = check_run(run, options);
  std::printf("%s", report.summary.c_str());
  for (const std::string& failure : report.failures)
    ADD_FAILURE() << failure;
  if (report.failures.empty()) {
    std::filesystem::remove_all(log_dir);
  } else {
    std::printf("chaos: logs kept in %s; replay with --seed %llu\n",
                std::filesystem::absolute(log_dir).c_str(),
                static_cast<unsigned long long>(run.seed));
  }
}

TEST(Chaos, SeededFaultsKeepLimitsDeadlinesAndRecovery) {
  const std::uint64_t seed = run_seed();
  const long seconds = run_seconds();
  const std::vector<Fault> schedule =
      make_schedule(seed, std::chrono::seconds(seconds), fleet_size, single_server_fault_kinds);
  const std::string log_dir = "chaos-" + std::to_string(seed);
  announce("one server", seed, seconds, schedule, log_dir);

  test::RedisServer redis(acl_user_args());
  const std::string url = "redis://redlimit:change-me@127.0.0.1:" + std::to_string(redis.port());
  std::atomic<long long> own_connections{0};
  Fleet fleet(worker_binary(), url, log_dir, seed, fleet_size);
  Nemesis nemesis(redis, fleet, own_connections);
  std::vector<Restart> restarts;
  RunRecord run = run_schedule(seed, fleet, &redis, own_connections, schedule,
                               [&](const Fault& fault) { return nemesis.inject(fault, restarts); });
  run.restarts = std::move(restarts);
  check_and_report(run, log_dir, CheckOptions{});
}

TEST(Chaos, SeededFailoversWithAReplicaKeepLimitsAcrossPrimaries) {
  const std::uint64_t seed = run_seed();
  const long seconds = replicated_run_seconds();
  const std::vector<Fault> schedule =
      make_schedule(seed, std::chrono::seconds(seconds), fleet_size, replicated_fault_kinds);
  const std::string log_dir = "chaos-replicated-" + std::to_string(seed);
  announce("a primary, its replica and three sentinels; replicas = 1", seed, seconds, schedule,
           log_dir);

  test::SentinelGroup group;
  group.wait_until_replicated(whole_again_timeout);
  std::atomic<long long> own_connections{0};
  Fleet fleet(worker_binary(), group.url(), log_dir, seed, fleet_size, {"replicas=1"});
  ReplicatedNemesis nemesis(group, fleet);
  // Why no restarts recorded: with replicas = 1 a promoted replica holds every admission that
  // was answered, so the checker holds the whole run to the limits as one Redis lifetime.
  const RunRecord run = run_schedule(seed, fleet, nullptr, own_connections, schedule,
                                     [&](const Fault& fault) { return nemesis.inject(fault); });
  // Why 2 s to recover: after a primary kill, the workers' writes on the new primary were seen
  // to go unacknowledged by its new replica for up to 1.44 s after a write of the suite's own
  // was acknowledged (at a load average of 7; not yet explained: docs/failures.md).
  check_and_report(run, log_dir, CheckOptions{.recovery_bound = std::chrono::milliseconds(2000)});
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--seed") {
      seed_option = std::stoull(argv[i + 1]);
      seed_given = true;
    } else if (arg == "--seconds") {
      seconds_option = std::stol(argv[i + 1]);
    }
  }
  return RUN_ALL_TESTS();
}
