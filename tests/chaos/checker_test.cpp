// The chaos checker on small made-up runs: each check fails on the fault it is there to catch.
#include "chaos/checker.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "chaos/workloads.hpp"

namespace redlimit::chaos {
namespace {

constexpr std::int64_t second = 1'000'000'000;
constexpr std::int64_t t0 = 1000 * second;             // monotonic start of the made-up run
constexpr std::int64_t wall0 = 1'800'000'000'000'000;  // its Redis TIME at the start

int stream_named(std::string_view name) {
  for (std::size_t i = 0; i < workloads.size(); ++i) {
    if (workloads[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

/// A C line as the worker writes it (call_log.hpp).
std::string call_line(std::string_view stream, std::int64_t start_ns, std::int64_t duration_ns,
                      const char* outcome, const char* source, std::int64_t server_us,
                      std::int64_t permits) {
  const std::int64_t wall_from = wall0 + (start_ns - t0) / 1000;
  return "C " + std::to_string(stream_named(stream)) + " " + std::to_string(start_ns) + " " +
         std::to_string(start_ns + duration_ns) + " " + std::to_string(duration_ns) + " 1 " +
         std::to_string(permits) + " " + outcome + " " + source + " " + std::to_string(server_us) +
         " 0 0 " + std::to_string(wall_from) + " " + std::to_string(wall_from + duration_ns / 1000);
}

/// A run of one worker over 30 s, whose log the test writes line by line.
class MadeUpRun {
 public:
  MadeUpRun() {
    dir_ =
        std::filesystem::temp_directory_path() /
        ("redlimit-checker-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    run.seed = 1;
    run.fleet_size = 1;
    run.start_ns = t0;
    run.end_ns = t0 + 30 * second;
    WorkerRun worker;
    worker.log_path = (dir_ / "worker-0.log").string();
    worker.start_ns = t0;
    worker.end_ns = run.end_ns + second;
    worker.exit_status = 0;
    run.workers.push_back(worker);
    log_.open(worker.log_path);
  }
  ~MadeUpRun() { std::filesystem::remove_all(dir_); }

  /// A call of `stream` for `permits` from `start_ns` taking `duration_ns`; its system clock
  /// reads wall0 at t0, as its Redis time does.
  void call(std::string_view stream, std::int64_t start_ns, std::int64_t duration_ns,
            const char* outcome, const char* source, std::int64_t server_us = 0,
            std::int64_t permits = 1) {
    log_ << call_line(stream, start_ns, duration_ns, outcome, source, server_us, permits) << "\n";
  }
  /// Every stream admitted by Redis every 20 ms (50/s, within every limit) from `from_ns` to
  /// `to_ns`.
  void healthy(std::int64_t from_ns, std::int64_t to_ns) {
    for (std::int64_t t = from_ns; t < to_ns; t += second / 50) {
      for (const Workload& w : workloads)
        call(w.name, t, 1'000'000, "A", "redis", wall0 + (t - t0) / 1000);
    }
  }
  /// A line as the worker writes it (call_log.hpp).
  void raw(const std::string& line) { log_ << line << "\n"; }
  /// Another worker that ran the whole run and ended cleanly, whose log holds `lines`.
  void worker(const std::vector<std::string>& lines) {
    WorkerRun worker;
    worker.log_path = (dir_ / ("worker-" + std::to_string(run.workers.size()) + ".log")).string();
    worker.start_ns = t0;
    worker.end_ns = run.end_ns + second;
    worker.exit_status = 0;
    run.workers.push_back(worker);
    std::ofstream log(worker.log_path);
    for (const std::string& line : lines)
      log << line << "\n";
    log << "END 0\n";
  }
  /// Another worker, killed at `killed_ns`, whose log holds `lines` (no END).
  void killed_worker(std::int64_t killed_ns, const std::vector<std::string>& lines) {
    WorkerRun worker;
    worker.log_path = (dir_ / ("worker-" + std::to_string(run.workers.size()) + ".log")).string();
    worker.start_ns = t0;
    worker.end_ns = killed_ns;
    worker.killed = true;
    run.workers.push_back(worker);
    std::ofstream log(worker.log_path);
    for (const std::string& line : lines)
      log << line << "\n";
  }
  CheckReport check(const CheckOptions& options = CheckOptions{}) {
    log_ << "END 0\n";
    log_.close();
    return check_run(run, options);
  }

  RunRecord run;

 private:
  std::filesystem::path dir_;
  std::ofstream log_;
};

bool mentions(const CheckReport& report, std::string_view text) {
  for (const std::string& failure : report.failures) {
    if (failure.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(ChaosChecker, HealthyRunPasses) {
  MadeUpRun run;
  run.healthy(t0, t0 + 30 * second);
  run.run.faults.push_back({FaultKind::stop, t0 + 10 * second, t0 + 11 * second});
  const CheckReport report = run.check();
  EXPECT_TRUE(report.failures.empty()) << report.summary;
}

TEST(ChaosChecker, OverAdmissionWithinOneRedisLifetimeIsAViolation) {
  MadeUpRun run;
  // fixed_window 100/s: 101 admissions by Redis within one aligned second.
  for (int i = 0; i < 101; ++i)
    run.call("window", t0 + i * 1000, 1000, "A", "redis", wall0 + i * 1000);
  EXPECT_TRUE(mentions(run.check(), "window: lifetime 0"));
}

TEST(ChaosChecker, AFreshKeyAfterARestartIsWithinTheDocumentedBound) {
  MadeUpRun run;
  // 100 before the kill and 100 after the restart, in the same window: one more limit.
  for (int i = 0; i < 100; ++i)
    run.call("window", t0 + i * 1000, 1000, "A", "redis", wall0 + i * 1000);
  for (int i = 0; i < 100; ++i)
    run.call("window", t0 + 500'000'000 + i * 1000, 1000, "A", "redis", wall0 + 500'000 + i * 1000);
  run.run.restarts.push_back({wall0 + 200'000});
  const CheckReport report = run.check();
  EXPECT_FALSE(mentions(report, "window")) << report.summary;
}

std::string grant(int id, std::int64_t granted_us, std::int64_t granted_ns) {
  const std::int64_t expires_us =
      granted_us + std::chrono::duration_cast<std::chrono::microseconds>(lease_ttl).count();
  return "G " + std::to_string(id) + " " + std::to_string(granted_us) + " " +
         std::to_string(expires_us) + " 1 " + std::to_string(granted_ns);
}

TEST(ChaosChecker, ADeadHoldersLeaseIsHeldUntilItsExpiry) {
  MadeUpRun run;
  // A worker killed while holding one lease (granted, never released); 100 ms later the other
  // worker holds all 5 permits of the capacity at once: 6 holders.
  run.killed_worker(t0 + second + 50'000'000, {grant(0, wall0 + 1'000'000, t0 + second)});
  for (int i = 0; i < 5; ++i) {
    run.raw(grant(i, wall0 + 1'100'000 + i, t0 + second + 100'000'000));
    run.raw("R " + std::to_string(i) + " " + std::to_string(wall0 + 1'200'000));
  }
  const CheckReport report = run.check();
  EXPECT_TRUE(mentions(report, "sem: lifetime 0 held 6 permits at once")) << report.summary;
}

TEST(ChaosChecker, AReleasedLeaseEndsAtItsRelease) {
  MadeUpRun run;
  run.raw(grant(0, wall0 + 1'000'000, t0 + second));
  run.raw("R 0 " + std::to_string(wall0 + 1'050'000));
  for (int i = 1; i < 6; ++i)
    run.raw(grant(i, wall0 + 1'100'000, t0 + second + 100'000'000));
  const CheckReport report = run.check();
  EXPECT_FALSE(mentions(report, "sem:")) << report.summary;
}

TEST(ChaosChecker, ALeasesLastEndLineCounts) {
  MadeUpRun run;
  // Its release was sent at 1.05 s (the first R), then failed before it ran: held to its expiry.
  run.raw(grant(0, wall0 + 1'000'000, t0 + second));
  run.raw("R 0 " + std::to_string(wall0 + 1'050'000));
  run.raw("R 0 " + std::to_string(wall0 + 1'500'000));
  for (int i = 1; i < 6; ++i)
    run.raw(grant(i, wall0 + 1'100'000, t0 + second + 100'000'000));
  const CheckReport report = run.check();
  EXPECT_TRUE(mentions(report, "sem: lifetime 0 held 6 permits at once")) << report.summary;
}

/// The window stream denied by Redis every 10 ms from `from_ns` to `to_ns`, its server time
/// `shift_us` from the run's: the offset samples a worker's calls give the checker.
void redis_denials(MadeUpRun& run, std::int64_t from_ns, std::int64_t to_ns,
                   std::int64_t shift_us) {
  for (std::int64_t t = from_ns; t < to_ns; t += second / 100)
    run.call("window", t, 1'000'000, "D", "redis", wall0 + (t + 1'000'000 - t0) / 1000 + shift_us);
}

TEST(ChaosChecker, ARedisClockStepBackSplitsTheChecksInsteadOfFoldingTwoSeconds) {
  MadeUpRun run;
  // 70 admissions in the real second before 10 s, then Redis TIME steps back 0.4 s, and 70 more
  // in the next real 0.4 s: on the server's axis 140 fall in one fixed window of 100.
  redis_denials(run, t0, t0 + 10 * second, 0);
  redis_denials(run, t0 + 10 * second, t0 + 20 * second, -400'000);
  for (int i = 0; i < 70; ++i) {
    const std::int64_t t = t0 + 9 * second + 500'000'000 + i * 5'000'000;
    run.call("window", t, 1'000'000, "A", "redis", wall0 + (t + 1'000'000 - t0) / 1000);
  }
  for (int i = 0; i < 70; ++i) {
    const std::int64_t t = t0 + 10 * second + i * 5'000'000;
    run.call("window", t, 1'000'000, "A", "redis", wall0 + (t + 1'000'000 - t0) / 1000 - 400'000);
  }
  const CheckReport report = run.check();
  EXPECT_FALSE(mentions(report, "window: lifetime")) << report.summary;
  EXPECT_NE(report.summary.find("Redis clock step of -400 ms at 10.0"), std::string::npos)
      << report.summary;
}

TEST(ChaosChecker, RepliesDelayedByAStalledLoopAreNoClockStep) {
  MadeUpRun run;
  // The worker's loop blocked for 600 ms: the replies of that time are read together, late.
  redis_denials(run, t0, t0 + 10 * second, 0);
  for (std::int64_t t = t0 + 10 * second; t < t0 + 10 * second + 600'000'000; t += second / 100)
    run.call("window", t, t0 + 10 * second + 600'000'000 - t, "D", "redis",
             wall0 + (t + 1'000'000 - t0) / 1000);
  redis_denials(run, t0 + 10 * second + 600'000'000, t0 + 20 * second, 0);
  // 101 admissions in one window stay a violation.
  for (int i = 0; i < 101; ++i) {
    const std::int64_t t = t0 + 12 * second + i * 5'000'000;
    run.call("window", t, 1'000'000, "A", "redis", wall0 + (t + 1'000'000 - t0) / 1000);
  }
  const CheckReport report = run.check();
  EXPECT_EQ(report.summary.find("clock step"), std::string::npos) << report.summary;
  EXPECT_TRUE(mentions(report, "window: lifetime 0")) << report.summary;
}

TEST(ChaosChecker, FailOpenAdmissionsAreCountedNotChecked) {
  MadeUpRun run;
  for (int i = 0; i < 500; ++i)
    run.call("open", t0 + i * 1000, 1000, "A", "fail_open");
  const CheckReport report = run.check();
  EXPECT_FALSE(mentions(report, "open: lifetime"));
  EXPECT_NE(report.summary.find("500 admitted by fail_open"), std::string::npos) << report.summary;
}

TEST(ChaosChecker, MultiPermitAdmissionsAreCountedByTheirPermits) {
  MadeUpRun run;
  // gcra 200/s burst 20: 7 calls of 3 permits at one instant take 21 permits (7 calls would fit).
  for (int i = 0; i < 7; ++i)
    run.call("tight", t0 + i * 1000, 1000, "A", "redis", wall0 + 1'000'000, 3);
  const CheckReport report = run.check();
  EXPECT_TRUE(mentions(report, "tight: lifetime 0: burst + rate x elapsed exceeded: 21 permits"))
      << report.summary;
}

/// `calls` admissions of `permits` each by the window stream's local fallback (fixed_window
/// 100/s with local_share 1/3: each process's fallback admits 33 permits per second), 10 ms
/// apart from `from_ns`, each call taking 100 us.
std::vector<std::string> fallback_admissions(std::int64_t from_ns, int calls,
                                             std::int64_t permits = 1) {
  std::vector<std::string> lines;
  for (int i = 0; i < calls; ++i)
    lines.push_back(
        call_line("window", from_ns + i * 10'000'000, 100'000, "A", "fallback", 0, permits));
  return lines;
}

TEST(ChaosChecker, FallbackAdmissionsOverTheLocalShareAreReported) {
  MadeUpRun run;
  for (const std::string& line : fallback_admissions(t0, 34))
    run.raw(line);
  const CheckReport report = run.check();
  EXPECT_TRUE(mentions(report,
                       "window: worker 0's local fallback admitted 34 permits in the window at "
                       "0.000 s, more than its share of 33"))
      << report.summary;
}

TEST(ChaosChecker, FallbackAdmissionsCountTheirPermits) {
  MadeUpRun run;
  // 12 calls of 3 permits: 36 permits, over the share of 33 (12 calls would fit).
  for (const std::string& line : fallback_admissions(t0, 12, 3))
    run.raw(line);
  const CheckReport report = run.check();
  EXPECT_TRUE(mentions(report, "window: worker 0's local fallback admitted 36 permits"))
      << report.summary;
}

TEST(ChaosChecker, FallbackAdmissionsOfTheFleetOverTheSumOfItsSharesAreReported) {
  MadeUpRun run;
  // Each of three processes grants the whole limit in one window: 300 permits, 99 allowed.
  for (const std::string& line : fallback_admissions(t0, 100))
    run.raw(line);
  run.worker(fallback_admissions(t0 + 1'000'000, 100));
  run.worker(fallback_admissions(t0 + 2'000'000, 100));
  const CheckReport report = run.check();
  EXPECT_TRUE(mentions(report,
                       "window: the fleet's local fallbacks admitted 300 permits in the window "
                       "at 0.000 s, more than the shares of its 3 processes (99)"))
      << report.summary;
  EXPECT_TRUE(mentions(report, "window: worker 2's local fallback admitted 100 permits"))
      << report.summary;
}

TEST(ChaosChecker, FallbackAdmissionsWithinEachProcessShareStayWithinTheFleetBound) {
  MadeUpRun run;
  // Three processes at their share in one window (99 permits), and the next window too.
  for (std::int64_t from : {t0, t0 + second}) {
    for (const std::string& line : fallback_admissions(from, 33))
      run.raw(line);
  }
  run.worker(fallback_admissions(t0 + 1'000'000, 33));
  run.worker(fallback_admissions(t0 + 2'000'000, 33));
  const CheckReport report = run.check();
  EXPECT_FALSE(mentions(report, "window")) << report.summary;
  EXPECT_NE(report.summary.find("at most 99 permits per window by the fleet"), std::string::npos)
      << report.summary;
}

TEST(ChaosChecker, AFallbackAdmissionWhoseCallSpannedTwoWindowsIsNotPlaced) {
  MadeUpRun run;
  // 33 permits in the first second, and one call from 0.9995 s to 1.0005 s: it may have been
  // decided in either window, so it counts in neither.
  for (const std::string& line : fallback_admissions(t0, 33))
    run.raw(line);
  run.call("window", t0 + 999'500'000, 1'000'000, "A", "fallback");
  const CheckReport report = run.check();
  EXPECT_FALSE(mentions(report, "window")) << report.summary;
  EXPECT_NE(report.summary.find("1 not placed"), std::string::npos) << report.summary;
}

TEST(ChaosChecker, ACallPastItsDeadlineAndSlackIsLate) {
  MadeUpRun run;
  const auto late = command_timeout + scheduling_slack + std::chrono::milliseconds(10);
  run.call("tight", t0, std::chrono::nanoseconds(late).count(), "D", "fail_closed");
  EXPECT_TRUE(mentions(run.check(), "late call: tight"));
}

TEST(ChaosChecker, AnErrorInsteadOfTheFailurePolicyFails) {
  MadeUpRun run;
  run.call("open", t0, 1000, "E:ConfigError", "-");
  EXPECT_TRUE(mentions(run.check(), "an error instead of the failure policy: open E:ConfigError"));
}

TEST(ChaosChecker, ACallRunningAtTheEndIsHanging) {
  MadeUpRun run;
  run.healthy(t0, t0 + 30 * second);
  run.raw("H " + std::to_string(stream_named("wait")) + " " + std::to_string(t0 + 29 * second));
  run.run.workers[0].exit_status = 3 << 8;  // exit(3): the worker's own hang report
  const CheckReport report = run.check();
  EXPECT_TRUE(mentions(report, "a wait call started at 29"));
  EXPECT_TRUE(mentions(report, "did not end cleanly"));
}

TEST(ChaosChecker, OnlyFailurePolicyAnswersAfterAFaultIsNoRecovery) {
  MadeUpRun run;
  run.healthy(t0, t0 + 10 * second);
  for (std::int64_t t = t0 + 10 * second; t < t0 + 30 * second; t += 1'000'000)
    run.call("tight", t, 1000, "D", "fail_closed");
  run.run.faults.push_back({FaultKind::restart, t0 + 9 * second, t0 + 10 * second});
  EXPECT_TRUE(mentions(run.check(), "restart at 9"));
}

TEST(ChaosChecker, AKeyHeldByDeadReservationsIsNoRecovery) {
  MadeUpRun run;
  run.healthy(t0, t0 + 10 * second);
  // After a worker_kill, the waiting stream is decided by Redis (denied) but admits nobody for
  // 2 s; every other stream is healthy.
  for (std::int64_t t = t0 + 10 * second; t < t0 + 30 * second; t += second / 50) {
    for (const Workload& w : workloads) {
      const bool held = w.name == "wait" && t < t0 + 12 * second;
      run.call(w.name, t, 1'000'000, held ? "D" : "A", "redis", wall0 + (t - t0) / 1000);
    }
  }
  run.run.faults.push_back({FaultKind::worker_kill, t0 + 10 * second, t0 + 10 * second, 1});
  EXPECT_TRUE(mentions(run.check(), "wait: no worker was admitted by Redis"));
}

TEST(ChaosChecker, AConnectionStormFails) {
  MadeUpRun run;
  run.healthy(t0, t0 + 30 * second);
  for (int i = 0; i < 20; ++i)
    run.run.connections.push_back({t0 + i * second / 4, i * 1000LL, 0, i});
  EXPECT_TRUE(mentions(run.check(), "connection storm"));
}

TEST(ChaosChecker, GrowingMemoryFails) {
  MadeUpRun run;
  run.healthy(t0, t0 + 30 * second);
  for (int i = 0; i < 30; ++i)
    run.run.processes.push_back({0, t0 + i * second, 10'000 + i * 1000L, 14});
  CheckOptions options;
  options.check_rss = true;
  EXPECT_TRUE(mentions(run.check(options), "RSS grew"));
}

}  // namespace
}  // namespace redlimit::chaos
