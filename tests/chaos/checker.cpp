#include "chaos/checker.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "chaos/call_log.hpp"
#include "chaos/clock_steps.hpp"
#include "chaos/fallback_share.hpp"
#include "chaos/workloads.hpp"
#include "support/decision_checker.hpp"

namespace redlimit::chaos {
namespace {

constexpr std::int64_t never = std::numeric_limits<std::int64_t>::max();

struct LeaseSpan {
  std::int64_t granted_us;
  std::int64_t end_us;  ///< its release, else its expiry (a dead or failed holder's)
  std::int64_t permits;
  std::int64_t granted_ns;
};

struct WorkerLog {
  std::vector<CallRecord> calls;
  std::vector<LeaseSpan> leases;
  std::map<long, std::size_t> lease_ids;  ///< a G line's id: its index in leases
  std::vector<std::pair<int, std::int64_t>> hanging;
  bool ended = false;
};

WorkerLog read_log(const std::string& path) {
  WorkerLog log;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string tag;
    fields >> tag;
    if (tag == "C") {
      CallRecord r;
      int burst = 0;
      fields >> r.stream >> r.start_ns >> r.end_ns >> r.max_ns >> r.count >> r.permits >>
          r.outcome >> r.source >> r.server_us >> burst >> r.waited_us >> r.wall_from_us >>
          r.wall_to_us;
      r.burst = burst != 0;
      if (fields) log.calls.push_back(r);  // a line cut by SIGKILL is dropped
    } else if (tag == "G") {
      long id = 0;
      LeaseSpan span{};
      fields >> id >> span.granted_us >> span.end_us >> span.permits >> span.granted_ns;
      if (!fields) continue;
      log.lease_ids[id] = log.leases.size();
      log.leases.push_back(span);
    } else if (tag == "R") {
      long id = 0;
      std::int64_t end_us = 0;
      fields >> id >> end_us;
      const auto lease = log.lease_ids.find(id);
      if (fields && lease != log.lease_ids.end()) log.leases[lease->second].end_us = end_us;
    } else if (tag == "H") {
      std::pair<int, std::int64_t> call;
      fields >> call.first >> call.second;
      log.hanging.push_back(call);
    } else if (tag == "END") {
      log.ended = true;
    }
  }
  return log;
}

bool admitted_by_redis(const CallRecord& r) {
  return r.outcome == "A" && r.source == "redis" && r.permits > 0;
}

std::string_view policy_name(FailurePolicy::Kind kind) {
  switch (kind) {
    case FailurePolicy::fail_closed:
      return "fail_closed";
    case FailurePolicy::fail_open:
      return "fail_open";
    case FailurePolicy::local_fallback:
      return "local_fallback";
  }
  return "?";
}

double ms(std::int64_t ns) {
  return static_cast<double>(ns) / 1e6;
}

/// The Redis lifetime (0 before the first restart) of a server time.
std::size_t lifetime_of(const std::vector<Restart>& restarts, std::int64_t wall_us) {
  std::size_t lifetime = 0;
  while (lifetime < restarts.size() && restarts[lifetime].kill_wall_us <= wall_us)
    ++lifetime;
  return lifetime;
}

/// `limit` with the extra permits docs/operations.md allows for one loss of state.
Limit with_one_loss(Limit limit, std::int64_t reserved) {
  switch (limit.algorithm) {
    case Algorithm::gcra:
    case Algorithm::token_bucket:
    case Algorithm::leaky_bucket: {
      const std::int64_t capacity = limit.burst != 0 ? limit.burst : limit.rate.permits;
      limit.burst = 2 * capacity + reserved;
      return limit;
    }
    default:
      limit.rate.permits *= 2;
      return limit;
  }
}

/// The most leases held at once.
std::int64_t most_held(std::vector<LeaseSpan> spans) {
  std::vector<std::pair<std::int64_t, std::int64_t>> events;
  for (const LeaseSpan& s : spans) {
    events.emplace_back(s.granted_us, s.permits);
    events.emplace_back(s.end_us, -s.permits);
  }
  // A release and a grant at the same microsecond: the release first (in the system's favour).
  std::sort(events.begin(), events.end());
  std::int64_t held = 0, most = 0;
  for (const auto& [time, delta] : events) {
    held += delta;
    most = std::max(most, held);
  }
  return most;
}

/// The Redis clock steps of the run, each seen by one or more workers: they cut the run into
/// clock segments, each checked on its own.
class ClockSegments {
 public:
  ClockSegments(const std::vector<WorkerLog>& logs, std::chrono::milliseconds tolerance) {
    std::vector<std::pair<ClockStep, std::size_t>> all;
    for (std::size_t w = 0; w < logs.size(); ++w) {
      for (const ClockStep& step : find_clock_steps(logs[w].calls, tolerance))
        all.emplace_back(step, w);
    }
    std::sort(all.begin(), all.end(),
              [](const auto& a, const auto& b) { return a.first.at_ns < b.first.at_ns; });
    // Why a second: every worker sees one step within a round trip of the others.
    for (const auto& [step, worker] : all) {
      if (steps_.empty() || step.at_ns > steps_.back().at_ns + 1'000'000'000) {
        steps_.push_back(step);
        seen_by_.emplace_back();
      }
      seen_by_.back()[worker] = step.at_ns;
    }
  }

  std::size_t count() const { return steps_.size() + 1; }

  /// The segment of a call of `worker` that ended at `ns`: the worker's own time of each step
  /// it saw, the first worker's of the others.
  std::size_t of(std::size_t worker, std::int64_t ns) const {
    std::size_t segment = 0;
    for (std::size_t s = 0; s < steps_.size(); ++s) {
      const auto own = seen_by_[s].find(worker);
      if (ns >= (own != seen_by_[s].end() ? own->second : steps_[s].at_ns)) segment = s + 1;
    }
    return segment;
  }

  void describe(std::ostream& out, std::int64_t run_start_ns) const {
    for (std::size_t s = 0; s < steps_.size(); ++s) {
      char line[160];
      std::snprintf(
          line, sizeof line,
          "Redis clock step of %+lld ms at %.1f s (seen by %zu workers): each side "
          "checked as its own lifetime\n",
          static_cast<long long>(std::llround(static_cast<double>(steps_[s].jump_us) / 1e3)),
          ms(steps_[s].at_ns - run_start_ns) / 1000, seen_by_[s].size());
      out << line;
    }
  }

 private:
  std::vector<ClockStep> steps_;
  std::vector<std::map<std::size_t, std::int64_t>> seen_by_;
};

struct Context {
  const RunRecord& run;
  const CheckOptions& options;
  std::vector<WorkerLog> logs;
  ClockSegments segments;
  CheckReport report;
  std::ostringstream summary;

  void fail(const std::string& text) { report.failures.push_back(text); }

  /// The system clock at the run's start, from the first call logged with its times.
  std::int64_t run_start_wall_us() const {
    for (const WorkerLog& log : logs) {
      for (const CallRecord& r : log.calls) {
        if (r.wall_from_us != 0) return r.wall_from_us - (r.start_ns - run.start_ns) / 1000;
      }
    }
    return 0;
  }
};

/// The admissions of stream `s` by each process's local fallback.
std::vector<FallbackAdmit> fallback_admits(const Context& c, std::size_t s) {
  std::vector<FallbackAdmit> admits;
  for (std::size_t w = 0; w < c.logs.size(); ++w) {
    for (const CallRecord& r : c.logs[w].calls) {
      if (r.stream != static_cast<int>(s) || r.outcome != "A" || r.source != "fallback" ||
          r.permits == 0) {
        continue;
      }
      admits.push_back({w, c.segments.of(w, r.end_ns), r.wall_from_us, r.wall_to_us, r.permits});
    }
  }
  return admits;
}

void check_limits(Context& c) {
  const auto& restarts = c.run.restarts;
  c.summary << "limits (admissions from Redis, per Redis lifetime; " << restarts.size()
            << " restarts):\n";
  for (std::size_t s = 0; s < workloads.size(); ++s) {
    const Workload& workload = workloads[s];
    std::map<std::string, long> other_admissions;
    ShareReport fallback;
    if (workload.on_failure == FailurePolicy::local_fallback) {
      fallback = check_fallback_shares(workload.name, workload.limit, local_share,
                                       fallback_admits(c, s), c.run_start_wall_us());
      for (const std::string& failure : fallback.failures)
        c.fail(failure);
    }
    // Index: the Redis lifetime within the clock segment.
    const std::size_t lifetimes = restarts.size() + 1;
    std::vector<std::vector<test::Admit>> admits(lifetimes * c.segments.count());
    std::vector<std::vector<LeaseSpan>> leases(admits.size());
    long from_redis = 0;
    for (std::size_t w = 0; w < c.logs.size(); ++w) {
      for (const CallRecord& r : c.logs[w].calls) {
        if (r.stream != static_cast<int>(s) || r.permits == 0) continue;
        if (r.outcome == "A" && r.source != "redis" && r.source != "fallback")
          other_admissions[r.source] += r.count;
        if (!admitted_by_redis(r) || workload.pattern == Pattern::semaphore) continue;
        ++from_redis;
        admits[c.segments.of(w, r.end_ns) * lifetimes +
               lifetime_of(restarts, r.server_us - r.waited_us)]
            .push_back({r.server_us, r.permits});
      }
      if (workload.pattern == Pattern::semaphore) {
        for (const LeaseSpan& span : c.logs[w].leases) {
          ++from_redis;
          leases[c.segments.of(w, span.granted_ns) * lifetimes +
                 lifetime_of(restarts, span.granted_us)]
              .push_back(span);
        }
      }
    }
    auto lifetime_name = [&](std::size_t index) {
      return "lifetime " + std::to_string(index % lifetimes) +
             (c.segments.count() > 1 ? " (clock segment " + std::to_string(index / lifetimes) + ")"
                                     : std::string());
    };
    long violations = 0;
    for (std::size_t life = 0; life < admits.size(); ++life) {
      if (workload.pattern == Pattern::semaphore) {
        const std::int64_t most = most_held(leases[life]);
        if (most > workload.limit.rate.permits) {
          ++violations;
          c.fail(std::string(workload.name) + ": " + lifetime_name(life) + " held " +
                 std::to_string(most) + " permits at once, capacity " +
                 std::to_string(workload.limit.rate.permits));
        }
        continue;
      }
      const test::CheckResult result = test::check_admits(workload.limit, admits[life]);
      if (!result) {
        ++violations;
        c.fail(std::string(workload.name) + ": " + lifetime_name(life) + ": " + result.description);
      }
    }
    for (std::size_t k = 0; k + 1 < admits.size(); ++k) {
      if ((k + 1) % lifetimes == 0) continue;  // the last lifetime of a clock segment
      const std::int64_t kill = restarts[k % lifetimes].kill_wall_us;
      if (workload.pattern == Pattern::semaphore) {
        std::vector<LeaseSpan> both = leases[k];
        both.insert(both.end(), leases[k + 1].begin(), leases[k + 1].end());
        if (most_held(both) > 2 * workload.limit.rate.permits) {
          ++violations;
          c.fail(std::string(workload.name) + ": across restart " + std::to_string(k % lifetimes) +
                 ": more than N more holders");
        }
        continue;
      }
      std::int64_t reserved = 0;
      for (const test::Admit& a : admits[k]) {
        if (a.time_us >= kill) reserved += a.permits;
      }
      std::vector<test::Admit> both = admits[k];
      both.insert(both.end(), admits[k + 1].begin(), admits[k + 1].end());
      const test::CheckResult result =
          test::check_admits(with_one_loss(workload.limit, reserved), both);
      if (!result) {
        ++violations;
        c.fail(std::string(workload.name) + ": across restart " + std::to_string(k % lifetimes) +
               ", beyond the documented bound: " + result.description);
      }
    }
    c.summary << "  " << workload.name << " (" << to_string(workload.limit.algorithm) << ", "
              << policy_name(workload.on_failure) << "): " << from_redis << " admitted by Redis, "
              << violations << " violations";
    for (const auto& [source, count] : other_admissions)
      c.summary << ", " << count << " admitted by " << source << " (not checked)";
    if (!fallback.summary.empty()) c.summary << "; " << fallback.summary;
    c.summary << "\n";
  }
}

std::int64_t budget_ns(const CallRecord& r) {
  const Workload& workload = workloads[static_cast<std::size_t>(r.stream)];
  const auto budget = r.permits == 0 ? command_timeout : call_budget(workload, r.burst);
  return std::chrono::duration_cast<std::chrono::nanoseconds>(budget).count();
}

/// Calls past their deadline, per fault (index; -1 outside any fault's window).
std::vector<long> check_deadlines(Context& c) {
  std::vector<long> late(c.run.faults.size() + 1, 0);
  const std::int64_t slack = std::chrono::nanoseconds(c.options.slack).count();
  long total = 0, examples = 0;
  std::int64_t worst = 0;
  for (const WorkerLog& log : c.logs) {
    for (const CallRecord& r : log.calls) {
      if (r.max_ns <= budget_ns(r) + slack) continue;
      ++total;
      worst = std::max(worst, r.max_ns - budget_ns(r));
      std::size_t window = c.run.faults.size();
      for (std::size_t f = 0; f < c.run.faults.size(); ++f) {
        const std::int64_t next =
            f + 1 < c.run.faults.size() ? c.run.faults[f + 1].start_ns : c.run.end_ns;
        if (r.end_ns >= c.run.faults[f].start_ns && r.end_ns < next) window = f;
      }
      ++late[window];
      if (examples++ < 5) {
        char text[256];
        std::snprintf(text, sizeof text,
                      "late call: %s took %.1f ms (budget %.0f ms + slack), outcome %s %s, %.3f s "
                      "into the run",
                      std::string(workloads[static_cast<std::size_t>(r.stream)].name).c_str(),
                      ms(r.max_ns), ms(budget_ns(r)), r.outcome.c_str(), r.source.c_str(),
                      ms(r.end_ns - c.run.start_ns) / 1000);
        c.fail(text);
      }
    }
  }
  c.summary << "deadlines: " << total << " calls late (by up to " << ms(worst)
            << " ms beyond their budget; slack " << c.options.slack.count() << " ms)\n";
  if (total > 5) c.fail(std::to_string(total) + " calls late in all");
  return late;
}

/// Calls answered with an error instead of a decision, per fault window. No fault of the run
/// takes a permission the scripts need, so every availability fault must get the failure
/// policy (docs/failures.md); only a lease's release (0 permits) may raise.
std::vector<long> check_errors(Context& c) {
  std::vector<long> errors(c.run.faults.size() + 1, 0);
  std::map<std::string, long> kinds;
  long examples = 0;
  for (const WorkerLog& log : c.logs) {
    for (const CallRecord& r : log.calls) {
      if (r.permits == 0 || r.outcome.rfind("E:", 0) != 0) continue;
      kinds[std::string(workloads[static_cast<std::size_t>(r.stream)].name) + " " + r.outcome] +=
          r.count;
      std::size_t window = c.run.faults.size();
      for (std::size_t f = 0; f < c.run.faults.size(); ++f) {
        if (r.end_ns >= c.run.faults[f].start_ns) window = f;
      }
      errors[window] += r.count;
      if (examples++ < 5) {
        c.fail(
            std::string("an error instead of the failure policy: ") +
            std::string(workloads[static_cast<std::size_t>(r.stream)].name) + " " + r.outcome +
            " at " + std::to_string(ms(r.end_ns - c.run.start_ns) / 1000) + " s" +
            (window < c.run.faults.size()
                 ? std::string(" (after ") + std::string(to_string(c.run.faults[window].kind)) + ")"
                 : std::string()));
      }
    }
  }
  c.summary << "errors instead of the failure policy:";
  if (kinds.empty()) c.summary << " none";
  for (const auto& [kind, count] : kinds)
    c.summary << " " << kind << " x" << count << ";";
  c.summary << "\n";
  return errors;
}

void check_hanging(Context& c) {
  long hanging = 0;
  for (std::size_t w = 0; w < c.logs.size(); ++w) {
    const WorkerRun& worker = c.run.workers[w];
    if (worker.killed) continue;
    for (const auto& [stream, start] : c.logs[w].hanging) {
      ++hanging;
      c.fail("worker " + std::to_string(w) + ": a " +
             std::string(workloads[static_cast<std::size_t>(stream)].name) + " call started at " +
             std::to_string(ms(start - c.run.start_ns) / 1000) + " s never ended");
    }
    const bool clean = worker.exit_status >= 0 && WIFEXITED(worker.exit_status) &&
                       WEXITSTATUS(worker.exit_status) == 0;
    if (!clean || !c.logs[w].ended) {
      c.fail(
          "worker " + std::to_string(w) +
          (worker.exit_status < 0
               ? std::string(" did not exit within 5 s of SIGTERM (its loop is blocked, or "
                             "calls hang and its own hang report could not run)")
               : " did not end cleanly (wait status " + std::to_string(worker.exit_status) + ")"));
    }
  }
  c.summary << "hanging calls at the end: " << hanging << "\n";
}

/// How long one fault took to recover from, and what recovered last.
struct Recovery {
  std::int64_t ns = 0;  ///< never: not before the next fault
  std::string what;
};

std::vector<Recovery> check_recovery(Context& c) {
  std::vector<Recovery> recovery;
  const std::int64_t bound =
      std::chrono::nanoseconds(c.options.recovery_bound + c.options.slack).count();
  for (std::size_t f = 0; f < c.run.faults.size(); ++f) {
    const FaultRun& fault = c.run.faults[f];
    const std::int64_t next =
        f + 1 < c.run.faults.size() ? c.run.faults[f + 1].start_ns : c.run.end_ns;
    // Per stream: every live worker decided in Redis again (allowed or denied: a denial is
    // the limit at work; also a deny-cache denial, which is exactly Redis's answer), and some
    // live worker was admitted by Redis again (the key moves).
    std::vector<std::int64_t> admitted(workloads.size(), never);
    std::vector<std::int64_t> decided(workloads.size(), 0);
    std::vector<std::string> last_to_decide(workloads.size());
    for (std::size_t w = 0; w < c.logs.size(); ++w) {
      const WorkerRun& worker = c.run.workers[w];
      if (worker.start_ns > fault.start_ns - 1'000'000'000 || worker.end_ns < next) continue;
      std::vector<std::int64_t> first(workloads.size(), never);
      for (const CallRecord& r : c.logs[w].calls) {
        const bool from_redis = r.source == "redis" || r.source == "deny_cache";
        if (!from_redis || r.permits == 0 || r.start_ns < fault.end_ns || r.end_ns > next) {
          continue;
        }
        const auto stream = static_cast<std::size_t>(r.stream);
        first[stream] = std::min(first[stream], r.end_ns - fault.end_ns);
        if (r.outcome == "A" && r.source == "redis")
          admitted[stream] = std::min(admitted[stream], r.end_ns - fault.end_ns);
      }
      for (std::size_t s = 0; s < workloads.size(); ++s) {
        if (first[s] > decided[s]) {
          decided[s] = first[s];
          last_to_decide[s] = "worker " + std::to_string(w);
        }
      }
    }
    std::int64_t slowest = 0;
    std::string slowest_stream;
    for (std::size_t s = 0; s < workloads.size(); ++s) {
      if (decided[s] > slowest) {
        slowest = decided[s];
        slowest_stream = std::string(workloads[s].name) + ": " + last_to_decide[s] +
                         " had no decision from Redis";
      }
      if (admitted[s] > slowest) {
        slowest = admitted[s];
        slowest_stream = std::string(workloads[s].name) + ": no worker was admitted by Redis";
      }
    }
    recovery.push_back({slowest, slowest_stream});
    if (slowest > bound) {
      c.fail(std::string(to_string(fault.kind)) + " at " +
             std::to_string(ms(fault.start_ns - c.run.start_ns) / 1000) + " s: " + slowest_stream +
             (slowest == never
                  ? " before the next fault (" + std::to_string(ms(next - fault.end_ns)) +
                        " ms after its end)"
                  : " until " + std::to_string(ms(slowest)) + " ms after the fault's end"));
    }
  }
  return recovery;
}

void check_connections(Context& c) {
  const auto& samples = c.run.connections;
  if (samples.empty()) {
    c.summary << "connections: not sampled\n";
    return;
  }
  const double per_second_bound = c.options.connections_per_worker_per_second * c.run.fleet_size;
  double worst = 0;
  std::int64_t worst_at = 0;
  for (std::size_t i = 0, j = 0; i < samples.size(); ++i) {
    j = std::max(j, i + 1);
    while (j < samples.size() && samples[j].at_ns - samples[i].at_ns < 1'000'000'000)
      ++j;
    if (j >= samples.size()) break;
    const ConnectionSample& a = samples[i];
    const ConnectionSample& b = samples[j];
    if (b.received < a.received || b.rejected < a.rejected) continue;  // a restart in between
    const double opened = static_cast<double>((b.received - a.received) +
                                              (b.rejected - a.rejected) - (b.own - a.own));
    const double rate = opened / (static_cast<double>(b.at_ns - a.at_ns) / 1e9);
    if (rate > worst) {
      worst = rate;
      worst_at = a.at_ns;
    }
  }
  c.summary << "connections: at most " << worst << " per second (bound " << per_second_bound
            << ")\n";
  if (worst > per_second_bound) {
    std::string during = "no fault";
    for (const FaultRun& fault : c.run.faults) {
      if (fault.start_ns <= worst_at + 1'000'000'000) during = std::string(to_string(fault.kind));
    }
    c.fail("connection storm: " + std::to_string(worst) + " connections per second at " +
           std::to_string(ms(worst_at - c.run.start_ns) / 1000) +
           " s (the last fault begun: " + during + ")");
  }
}

std::int64_t median(std::vector<std::int64_t> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

void check_resources(Context& c) {
  const std::int64_t third = (c.run.end_ns - c.run.start_ns) / 3;
  for (std::size_t w = 0; w < c.run.workers.size(); ++w) {
    const WorkerRun& worker = c.run.workers[w];
    if (worker.killed || worker.start_ns > c.run.start_ns + 1'000'000'000) continue;
    std::vector<std::int64_t> rss_first, rss_last;
    int fds_first = 0, fds_last = 0;
    for (const ProcessSample& s : c.run.processes) {
      if (s.worker != static_cast<int>(w)) continue;
      if (s.at_ns < c.run.start_ns + third) {
        rss_first.push_back(s.rss_kb);
        fds_first = std::max(fds_first, s.fds);
      } else if (s.at_ns > c.run.end_ns - third) {
        rss_last.push_back(s.rss_kb);
        fds_last = std::max(fds_last, s.fds);
      }
    }
    if (rss_first.empty() || rss_last.empty()) continue;
    const std::int64_t before = median(rss_first), after = median(rss_last);
    c.summary << "worker " << w << ": RSS " << before << " -> " << after << " kB, descriptors "
              << fds_first << " -> " << fds_last << " (first and last thirds)\n";
    if (c.options.check_rss &&
        static_cast<double>(after) > static_cast<double>(before) * (1 + c.options.rss_growth) +
                                         static_cast<double>(c.options.rss_growth_kb)) {
      c.fail("worker " + std::to_string(w) + ": RSS grew from " + std::to_string(before) + " to " +
             std::to_string(after) + " kB");
    }
    if (fds_last > fds_first + c.options.fd_growth) {
      c.fail("worker " + std::to_string(w) + ": open descriptors grew from " +
             std::to_string(fds_first) + " to " + std::to_string(fds_last));
    }
  }
}

void summarize_faults(Context& c, const std::vector<Recovery>& recovery,
                      const std::vector<long>& late, const std::vector<long>& errors) {
  const std::int64_t bound =
      std::chrono::nanoseconds(c.options.recovery_bound + c.options.slack).count();
  char line[200];
  std::snprintf(line, sizeof line, "%-14s %5s %8s %8s %8s %5s %5s %6s  %s\n", "fault", "count",
                "rec min", "median", "max", "slow", "late", "errors",
                "last to recover (at the max)");
  c.summary << "recovery (ms from each fault's end until, in every stream, every live worker "
               "decided in Redis and one was admitted by Redis):\n"
            << line;
  std::vector<FaultKind> kinds;  // in the order each first happened
  for (const FaultRun& fault : c.run.faults) {
    if (std::find(kinds.begin(), kinds.end(), fault.kind) == kinds.end())
      kinds.push_back(fault.kind);
  }
  for (FaultKind kind : kinds) {
    std::vector<std::int64_t> times;
    long slow = 0, late_calls = 0, error_calls = 0;
    Recovery worst;
    for (std::size_t f = 0; f < c.run.faults.size(); ++f) {
      if (c.run.faults[f].kind != kind) continue;
      times.push_back(recovery[f].ns);
      if (recovery[f].ns > bound) ++slow;
      if (recovery[f].ns >= worst.ns) worst = recovery[f];
      late_calls += late[f];
      error_calls += errors[f];
    }
    if (times.empty()) continue;
    std::sort(times.begin(), times.end());
    auto show = [](std::int64_t ns) {
      return ns == never ? std::string("never") : std::to_string(static_cast<long>(ms(ns)));
    };
    std::snprintf(line, sizeof line, "%-14s %5zu %8s %8s %8s %5ld %5ld %6ld  %s\n",
                  std::string(to_string(kind)).c_str(), times.size(), show(times.front()).c_str(),
                  show(times[times.size() / 2]).c_str(), show(times.back()).c_str(), slow,
                  late_calls, error_calls, worst.what.c_str());
    c.summary << line;
  }
}

}  // namespace

CheckReport check_run(const RunRecord& run, const CheckOptions& options) {
  std::vector<WorkerLog> logs;
  long calls = 0;
  for (const WorkerRun& worker : run.workers) {
    logs.push_back(read_log(worker.log_path));
    for (const CallRecord& r : logs.back().calls)
      calls += r.count;
  }
  ClockSegments segments(logs, options.clock_step_tolerance);
  Context c{run, options, std::move(logs), std::move(segments), {}, {}};
  c.summary << "seed " << run.seed << ", " << ms(run.end_ns - run.start_ns) / 1000 << " s, "
            << run.workers.size() << " worker processes, " << run.faults.size() << " faults, "
            << calls << " calls\n";
  c.segments.describe(c.summary, run.start_ns);
  check_limits(c);
  const std::vector<long> late = check_deadlines(c);
  const std::vector<long> errors = check_errors(c);
  check_hanging(c);
  const std::vector<Recovery> recovery = check_recovery(c);
  summarize_faults(c, recovery, late, errors);
  check_connections(c);
  check_resources(c);
  c.report.summary = c.summary.str();
  return std::move(c.report);
}

}  // namespace redlimit::chaos
