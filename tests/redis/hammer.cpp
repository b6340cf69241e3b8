// One process of the accuracy test: `coroutines` coroutines on one loop hammer one key of a
// Redis limiter for `duration_ms`, each asking once per turn so that the process offers
// `offered_per_second` in all, and write every admitted decision ("<server_time_us> <permits>")
// and every denial decided in Redis ("deny <server_time_us>") to `out`. All start at once; a denied
// coroutine comes back after retry_after or at its next turn, whichever is first, as a well-behaved
// client would.
//
// usage: hammer <redis-url> <key> <algorithm> <permits> <period_us> <burst> <aligned|anchored>
//               <coroutines> <duration_ms> <offered_per_second> <out> [failures-expected]
//               [replicas=N]
//
// A decision of the failure policy, or an error, fails the run (exit status 1): the log may then
// miss an admission. With failures-expected (a failover on purpose) they are counted in the
// output's first line instead, and the log checks what it holds. replicas=N sets
// ClientOptions::replicas (with a replica_timeout of 500 ms).
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "redlimit/redlimit.hpp"
#include "redlimit/task_group.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Tally {
  std::vector<std::pair<std::int64_t, std::int64_t>> admitted;
  std::vector<std::int64_t> denied_in_redis;
  long denied = 0;
  long errors = 0;
};

redlimit::Algorithm algorithm_named(const std::string& name) {
  using redlimit::Algorithm;
  for (Algorithm a :
       {Algorithm::gcra, Algorithm::token_bucket, Algorithm::leaky_bucket, Algorithm::fixed_window,
        Algorithm::sliding_window_log, Algorithm::sliding_window_counter}) {
    if (redlimit::to_string(a) == name) return a;
  }
  throw std::invalid_argument("unknown algorithm " + name);
}

redlimit::Task<void> hammer(uv_loop_t* loop, redlimit::Limiter& limiter, std::string key,
                            Clock::time_point end, std::chrono::microseconds turn, Tally* tally) {
  while (Clock::now() < end) {
    const auto started = Clock::now();
    std::chrono::microseconds wait = turn;
    try {
      const redlimit::Decision d = co_await limiter.try_acquire(key);
      if (d.source != redlimit::Source::redis && d.source != redlimit::Source::deny_cache) {
        // A failure policy decided (a reply past its deadline, the breaker open): the command
        // may have run in Redis without its admission in the log, so the run proves nothing.
        ++tally->errors;
        std::fprintf(stderr, "hammer: a decision from the failure policy\n");
      } else if (d.allowed) {
        tally->admitted.emplace_back(d.server_time_us, 1);
      } else {
        ++tally->denied;
        if (d.source == redlimit::Source::redis) tally->denied_in_redis.push_back(d.server_time_us);
        wait = std::min(turn, d.retry_after);
      }
    } catch (const redlimit::Error& e) {
      ++tally->errors;
      std::fprintf(stderr, "hammer: %s\n", e.what());
    }
    const auto now = Clock::now();
    const auto wake = std::min(started + wait, end);
    if (wake > now) {
      co_await redlimit::sleep_for(
          loop, std::chrono::duration_cast<std::chrono::microseconds>(wake - now));
    }
  }
}

redlimit::Task<void> main_task(uv_loop_t* loop, redlimit::Client& client,
                               redlimit::Limiter& limiter, std::string key, int coroutines,
                               std::chrono::milliseconds duration, double offered, Tally* tally) {
  co_await client.connect();
  const auto end = Clock::now() + duration;
  const auto turn =
      std::chrono::microseconds(static_cast<std::int64_t>(coroutines * 1e6 / offered));
  redlimit::TaskGroup group;
  for (int i = 0; i < coroutines; ++i)
    group.add(hammer(loop, limiter, key, end, turn, tally));
  co_await group.join();
  co_await client.close();
}

}  // namespace

int main(int argc, char** argv) {
  bool failures_expected = false;
  int replicas = 0;
  bool usable = argc >= 12;
  for (int i = 12; i < argc; ++i) {
    const std::string option = argv[i];
    if (option == "failures-expected") {
      failures_expected = true;
    } else if (option.starts_with("replicas=")) {
      replicas = std::stoi(option.substr(9));
    } else {
      usable = false;
    }
  }
  if (!usable) {
    std::fprintf(stderr,
                 "usage: hammer <url> <key> <algorithm> <permits> <period_us> <burst> "
                 "<aligned|anchored> <coroutines> <duration_ms> <offered/s> <out> "
                 "[failures-expected] [replicas=N]\n");
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  const redlimit::Limit limit{
      algorithm_named(argv[3]),
      {std::stoll(argv[4]), std::chrono::microseconds(std::stoll(argv[5]))},
      std::stoll(argv[6]),
      std::string(argv[7]) == "anchored" ? redlimit::Window::anchored : redlimit::Window::aligned};
  uv_loop_t loop;
  uv_loop_init(&loop);
  Tally tally;
  {
    redlimit::Client client(&loop, {.url = argv[1],
                                    .command_timeout = 2000ms,
                                    .reservation_lease = 6000ms,
                                    .replicas = replicas,
                                    .replica_timeout = 500ms});
    redlimit::Limiter limiter(client, redlimit::Policy::of(limit), {.name = "accuracy"});
    redlimit::run(&loop, main_task(&loop, client, limiter, argv[2], std::stoi(argv[8]),
                                   std::chrono::milliseconds(std::stoll(argv[9])),
                                   std::stod(argv[10]), &tally));
  }
  std::ofstream out(argv[11]);
  out << "# denied " << tally.denied << " errors " << tally.errors << "\n";
  for (const auto& [time, permits] : tally.admitted)
    out << time << " " << permits << "\n";
  for (const std::int64_t time : tally.denied_in_redis)
    out << "deny " << time << "\n";
  return uv_loop_close(&loop) == 0 && (tally.errors == 0 || failures_expected) ? 0 : 1;
}
