// One process of the chaos fleet: runs every stream of workloads.hpp on one Client until
// SIGTERM, and logs every call (call_log.hpp). SIGUSR1 starts burst_calls waiting acquire()
// calls at once (a backlog of reservations the nemesis then kills). If calls are still running
// 3 s after SIGTERM, it logs them as hanging and exits with status 3.
//
// usage: chaos_worker <redis-url> <log> <seed> [replicas=N]
// replicas=N sets ClientOptions::replicas (replica_timeout stays its default).
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "chaos/call_log.hpp"
#include "chaos/workloads.hpp"
#include "redlimit/redlimit.hpp"
#include "redlimit/task_group.hpp"

namespace {

using namespace redlimit;
using namespace redlimit::chaos;

std::string error_kind(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const CircuitOpen&) {
    return "E:CircuitOpen";
  } catch (const TimeoutError&) {
    return "E:TimeoutError";
  } catch (const ConnectionError&) {
    return "E:ConnectionError";
  } catch (const Overloaded&) {
    return "E:Overloaded";
  } catch (const Unavailable&) {
    return "E:Unavailable";
  } catch (const ConfigError&) {
    return "E:ConfigError";
  } catch (const Cancelled&) {
    return "K";
  } catch (const LeaseExpired&) {
    return "E:LeaseExpired";
  } catch (const ReplyError&) {
    return "E:ReplyError";
  } catch (const Error&) {
    return "E:Error";
  } catch (...) {
    return "E:other";
  }
}

/// A call running on one lane (one coroutine): its stream and start, for the hanging report.
struct InFlight {
  int stream = 0;
  std::int64_t start_ns = 0;
  std::int64_t wall_from_us = 0;
};

/// Everything the worker's coroutines share; lives in main() for the whole run.
struct Worker {
  Worker(uv_loop_t* loop, Client& client, const std::string& log_path, std::uint64_t seed)
      : loop(loop), client(client), log(log_path), random(seed) {
    for (const Workload& workload : workloads) {
      FailurePolicy failure{workload.on_failure, local_share};
      if (workload.pattern == Pattern::semaphore) {
        SemaphoreOptions options;
        options.name = std::string(workload.name);
        options.lease_ttl = lease_ttl;
        options.on_failure = failure;
        semaphore =
            std::make_unique<Semaphore>(client, workload.limit.rate.permits, std::move(options));
        limiters.push_back(nullptr);
      } else {
        LimiterOptions options;
        options.name = std::string(workload.name);
        options.on_failure = failure;
        limiters.push_back(
            std::make_unique<Limiter>(client, Policy::of(workload.limit), std::move(options)));
      }
    }
  }

  std::size_t new_lane() {
    in_flight.emplace_back();
    return in_flight.size() - 1;
  }
  void started(std::size_t lane, int stream) {
    in_flight[lane] = {stream, monotonic_ns(), wall_us()};
  }
  void finished(std::size_t lane, CallRecord record) {
    record.start_ns = in_flight[lane].start_ns;
    record.stream = in_flight[lane].stream;
    record.wall_from_us = in_flight[lane].wall_from_us;
    record.end_ns = monotonic_ns();
    record.wall_to_us = wall_us();
    in_flight[lane] = {};
    log.record(lane, record);
  }
  int uniform(int low, int high) { return std::uniform_int_distribution<int>(low, high)(random); }
  /// The permits of a call of `stream` (Workload::most_permits).
  std::int64_t permits(int stream) {
    return std::uniform_int_distribution<std::int64_t>(
        1, workloads[static_cast<std::size_t>(stream)].most_permits)(random);
  }

  uv_loop_t* loop;
  Client& client;
  CallLog log;
  std::mt19937_64 random;
  std::vector<std::unique_ptr<Limiter>> limiters;
  std::unique_ptr<Semaphore> semaphore;
  std::vector<InFlight> in_flight;
  TaskGroup group;
  bool stopping = false;
  long next_lease_id = 0;
};

CallRecord decision_record(const Decision& d, std::int64_t permits) {
  CallRecord r;
  r.permits = permits;
  r.outcome = d.allowed ? "A" : "D";
  r.source = std::string(to_string(d.source));
  r.server_us = d.server_time_us;
  r.waited_us = d.waited.count();
  return r;
}

CallRecord error_record(std::exception_ptr error, std::int64_t permits) {
  CallRecord r;
  r.permits = permits;
  r.outcome = error_kind(error);
  r.source = "-";
  return r;
}

Task<void> try_acquire_loop(Worker& w, int stream, std::size_t lane, bool paced) {
  Limiter& limiter = *w.limiters[static_cast<std::size_t>(stream)];
  while (!w.stopping) {
    const std::int64_t permits = w.permits(stream);
    w.started(lane, stream);
    try {
      const Decision d = co_await limiter.try_acquire("k", permits);
      w.finished(lane, decision_record(d, permits));
    } catch (...) {
      w.finished(lane, error_record(std::current_exception(), permits));
    }
    if (paced) co_await sleep_for(w.loop, std::chrono::milliseconds(w.uniform(5, 15)));
  }
  w.log.close_run(lane);
}

Task<void> cancel_later(uv_loop_t* loop, std::stop_source source, std::chrono::milliseconds after) {
  co_await sleep_for(loop, after);
  source.request_stop();
}

Task<void> one_acquire(Worker& w, int stream, std::size_t lane, std::int64_t permits,
                       std::chrono::milliseconds wait, std::stop_token stop, bool burst) {
  Limiter& limiter = *w.limiters[static_cast<std::size_t>(stream)];
  w.started(lane, stream);
  try {
    AcquireOptions options;
    options.max_wait = wait;
    options.stop = stop;
    const Decision d = co_await limiter.acquire("k", permits, options);
    CallRecord r = decision_record(d, permits);
    r.burst = burst;
    w.finished(lane, r);
  } catch (...) {
    CallRecord r = error_record(std::current_exception(), permits);
    r.burst = burst;
    w.finished(lane, r);
  }
}

Task<void> acquire_loop(Worker& w, int stream, std::size_t lane) {
  while (!w.stopping) {
    std::stop_source source;
    if (w.uniform(0, 7) == 0) {
      w.group.add(cancel_later(w.loop, source, std::chrono::milliseconds(w.uniform(0, 50))));
    }
    co_await one_acquire(w, stream, lane, w.permits(stream), max_wait, source.get_token(), false);
    co_await sleep_for(w.loop, std::chrono::milliseconds(w.uniform(50, 150)));
  }
  w.log.close_run(lane);
}

Task<void> burst_acquire(Worker& w, int stream, std::size_t lane) {
  co_await one_acquire(w, stream, lane, 1, burst_max_wait, std::stop_token{}, true);
  w.log.close_run(lane);
}

/// Gives the lease back, logged as a call of 0 permits (its errors are expected: a release is not
/// covered by the failure policy), and logs the end of lease `id` (granted by Redis at
/// `granted_us`; 0: not from Redis). A release that failed after it may have run in Redis ends,
/// for the checker, when it was sent (in the system's favour: the server time of the grant plus
/// the time held since its reply); one that surely did not run ends at the lease's expiry.
Task<void> release(Worker& w, int stream, std::size_t lane, Lease& lease, long id,
                   std::int64_t granted_us, std::int64_t granted_ns) {
  w.started(lane, stream);
  const std::int64_t sent_ns = monotonic_ns();
  // Why logged before it is sent: a worker killed before the reply leaves a release that may
  // have run; the lease then ends, for the checker, when it was sent (a later R line replaces it).
  if (granted_us != 0) w.log.released(id, granted_us + (sent_ns - granted_ns) / 1000);
  std::exception_ptr error;
  bool maybe_released = false;
  try {
    co_await lease.release();
  } catch (const Unavailable& e) {
    maybe_released = e.maybe_executed();
    error = std::current_exception();
  } catch (...) {
    error = std::current_exception();
  }
  CallRecord r = error ? error_record(error, 0) : decision_record(Decision{.allowed = true}, 0);
  w.finished(lane, r);
  if (granted_us == 0) co_return;
  std::int64_t end_us = lease.released_at_us();
  if (end_us == 0) {
    end_us = maybe_released ? granted_us + (sent_ns - granted_ns) / 1000 : lease.expires_at_us();
  }
  w.log.released(id, end_us);
}

Task<void> lease_loop(Worker& w, int stream, std::size_t lane) {
  while (!w.stopping) {
    w.started(lane, stream);
    std::optional<Lease> lease;
    std::int64_t granted_ns = 0;
    try {
      AcquireOptions options;
      options.max_wait = max_wait;
      lease.emplace(co_await w.semaphore->acquire("k", 1, options));
      granted_ns = monotonic_ns();
    } catch (...) {
      w.finished(lane, error_record(std::current_exception(), 1));
    }
    if (lease) {
      CallRecord r;
      r.outcome = lease->held() ? "A" : "D";
      r.source = std::string(to_string(lease->source()));
      const long id = w.next_lease_id++;
      if (lease->held() && lease->source() == Source::redis) {
        r.server_us = lease->expires_at_us() - std::chrono::microseconds(lease_ttl).count();
        // Why at the grant: a worker killed while holding it leaves no release line, and the
        // checker must still count the lease as held until its expiry.
        w.log.grant(id, r.server_us, lease->expires_at_us(), 1, granted_ns);
      }
      w.finished(lane, r);
      if (lease->held()) {
        co_await sleep_for(w.loop, std::chrono::milliseconds(w.uniform(2, 10)));
        co_await release(w, stream, lane, *lease, id, r.server_us, granted_ns);
      }
    }
    co_await sleep_for(w.loop, std::chrono::milliseconds(w.uniform(1, 5)));
  }
  w.log.close_run(lane);
}

Task<void> run_worker(Worker& w) {
  try {
    co_await w.client.connect();
  } catch (const Error&) {  // a fault may be running: the first calls connect again
  }
  for (std::size_t i = 0; i < workloads.size(); ++i) {
    const int stream = static_cast<int>(i);
    for (int c = 0; c < workloads[i].coroutines; ++c) {
      switch (workloads[i].pattern) {
        case Pattern::tight:
          w.group.add(try_acquire_loop(w, stream, w.new_lane(), false));
          break;
        case Pattern::paced:
          w.group.add(try_acquire_loop(w, stream, w.new_lane(), true));
          break;
        case Pattern::waiting:
          w.group.add(acquire_loop(w, stream, w.new_lane()));
          break;
        case Pattern::semaphore:
          w.group.add(lease_loop(w, stream, w.new_lane()));
          break;
      }
    }
  }
  co_await w.group.join();
  co_await w.client.close();
}

Worker* the_worker = nullptr;

void on_hang(uv_timer_t*) {
  Worker& w = *the_worker;
  for (const InFlight& call : w.in_flight) {
    if (call.start_ns != 0) w.log.hanging(call.stream, call.start_ns);
  }
  std::_Exit(3);
}

uv_timer_t hang_timer;  // Why static: uv handles must outlive their close callback
uv_signal_t term_signal;
uv_signal_t burst_signal;

void on_term(uv_signal_t*, int) {
  the_worker->stopping = true;
  uv_timer_start(&hang_timer, on_hang, 3000, 0);
}

void on_burst(uv_signal_t*, int) {
  Worker& w = *the_worker;
  if (w.stopping) return;
  for (std::size_t i = 0; i < workloads.size(); ++i) {
    if (workloads[i].pattern != Pattern::waiting) continue;
    for (int n = 0; n < burst_calls; ++n)
      w.group.add(burst_acquire(w, static_cast<int>(i), w.new_lane()));
    return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view replicas_option = argc == 5 ? argv[4] : "replicas=0";
  if ((argc != 4 && argc != 5) || !replicas_option.starts_with("replicas=")) {
    std::fprintf(stderr, "usage: chaos_worker <redis-url> <log> <seed> [replicas=N]\n");
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    ClientOptions options;
    options.url = argv[1];
    options.command_timeout = command_timeout;
    options.reconnect_max = reconnect_max;
    options.replicas = std::stoi(std::string(replicas_option.substr(9)));
    Client client(&loop, options);
    Worker worker(&loop, client, argv[2], std::stoull(argv[3]));
    the_worker = &worker;
    uv_timer_init(&loop, &hang_timer);
    uv_signal_init(&loop, &term_signal);
    uv_signal_init(&loop, &burst_signal);
    uv_signal_start(&term_signal, on_term, SIGTERM);
    uv_signal_start(&burst_signal, on_burst, SIGUSR1);
    try {
      run(&loop, run_worker(worker));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "chaos_worker: %s\n", e.what());
    }
    for (auto* handle :
         {reinterpret_cast<uv_handle_t*>(&hang_timer), reinterpret_cast<uv_handle_t*>(&term_signal),
          reinterpret_cast<uv_handle_t*>(&burst_signal)}) {
      uv_close(handle, nullptr);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    worker.log.end();
    the_worker = nullptr;
  }
  return uv_loop_close(&loop) == 0 ? 0 : 4;
}
