// The seeded fault suite: a private redis-server, a fleet of worker processes (worker.cpp) under
// load, a nemesis making faults from a seeded schedule, and the checker over everything logged.
//
// The seed: `--seed N`, else $REDLIMIT_CHAOS_SEED, else random; printed first. The same seed
// replays the same schedule. The length: `--seconds N`, else $REDLIMIT_CHAOS_SECONDS (meson
// option chaos_seconds), else 170. Logs stay in chaos-<seed>/ (in the working directory) when a
// check fails.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

#include "chaos/call_log.hpp"
#include "chaos/checker.hpp"
#include "chaos/fleet.hpp"
#include "chaos/nemesis.hpp"
#include "chaos/sampler.hpp"
#include "support/acl_line.hpp"
#include "support/redis_server.hpp"

namespace {

using namespace redlimit;
using namespace redlimit::chaos;
using namespace std::chrono_literals;

std::uint64_t seed_option = 0;
bool seed_given = false;
long seconds_option = 0;

constexpr int fleet_size = 3;

std::uint64_t run_seed() {
  if (seed_given) return seed_option;
  if (const char* env = std::getenv("REDLIMIT_CHAOS_SEED"); env != nullptr && *env != '\0')
    return std::stoull(env);
  return std::random_device{}();
}

long run_seconds() {
  if (seconds_option > 0) return seconds_option;
  if (const char* env = std::getenv("REDLIMIT_CHAOS_SECONDS"); env != nullptr && *env != '\0')
    return std::stol(env);
  return 170;
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

TEST(Chaos, SeededFaultsKeepLimitsDeadlinesAndRecovery) {
  const std::uint64_t seed = run_seed();
  const long seconds = run_seconds();
  std::printf("chaos: seed %llu, %ld s (replay: --seed %llu or REDLIMIT_CHAOS_SEED=%llu)\n",
              static_cast<unsigned long long>(seed), seconds, static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  const std::vector<Fault> schedule =
      make_schedule(seed, std::chrono::seconds(seconds), fleet_size);
  for (const Fault& fault : schedule) {
    std::printf("  %s %lld ms, gap %lld ms%s\n", std::string(to_string(fault.kind)).c_str(),
                static_cast<long long>(fault.length.count()),
                static_cast<long long>(fault.gap.count()),
                fault.victim >= 0 ? (", worker slot " + std::to_string(fault.victim)).c_str() : "");
  }
  std::fflush(stdout);

  const std::string log_dir = "chaos-" + std::to_string(seed);
  std::filesystem::remove_all(log_dir);
  std::filesystem::create_directories(log_dir);

  test::RedisServer redis(acl_user_args());
  const std::string url = "redis://redlimit:change-me@127.0.0.1:" + std::to_string(redis.port());
  std::atomic<long long> own_connections{0};
  Fleet fleet(worker_binary(), url, log_dir, seed, fleet_size);
  Nemesis nemesis(redis, fleet, own_connections);

  RunRecord run;
  run.seed = seed;
  run.fleet_size = fleet_size;
  run.start_ns = monotonic_ns();
  fleet.start();
  {
    Sampler sampler(redis, fleet, own_connections);
    std::this_thread::sleep_for(warmup);
    for (const Fault& fault : schedule) {
      run.faults.push_back(nemesis.inject(fault, run.restarts));
      std::this_thread::sleep_for(fault.gap);
    }
    run.end_ns = monotonic_ns();
    fleet.stop(5000);
    sampler.finish(run.connections, run.processes);
  }
  run.workers = fleet.runs();
  write_faults(run, log_dir + "/faults.txt");

  const CheckReport report = check_run(run, CheckOptions{});
  std::printf("%s", report.summary.c_str());
  for (const std::string& failure : report.failures)
    ADD_FAILURE() << failure;
  if (report.failures.empty()) {
    std::filesystem::remove_all(log_dir);
  } else {
    std::printf("chaos: logs kept in %s; replay with --seed %llu\n",
                std::filesystem::absolute(log_dir).c_str(), static_cast<unsigned long long>(seed));
  }
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
