// One process of the policy fleet test: a Limiter made without a policy follows the one stored
// under `name`, and `coroutines` coroutines per key hammer each key, each asking once per
// `turn_us`, until the file `<out>.stop` exists (or 120 s passed). On its first PolicyNotFound it
// creates `<out>.waiting`, so the test knows it runs before any policy is stored. Writes every
// admitted decision ("admit <key> <server_time_us> <permits> <policy_version>"), every denial
// decided in Redis ("deny <key> <server_time_us> 0 <policy_version>") and every error
// ("error <kind> <what>", kind "not_found" for PolicyNotFound, "failure" for a decision of the
// failure policy, else "other") to `out`. Before a policy is stored it must fail with
// PolicyNotFound, never allow.
//
// usage: fleet_follower <redis-url> <name> <coroutines> <turn_us> <out> <key>...
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "redlimit/redlimit.hpp"
#include "redlimit/task_group.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto longest_run = 120s;
constexpr auto stop_poll = 20ms;

struct Decided {
  std::string key;
  redlimit::Decision decision;
};

struct Run {
  std::string out;
  bool stopping = false;
  bool waiting_marked = false;
  std::vector<Decided> decided;     ///< admitted, or denied in Redis
  std::vector<std::string> errors;  ///< "<kind> <what>"
};

redlimit::Task<void> hammer(uv_loop_t* loop, redlimit::Limiter& limiter, std::string key,
                            std::chrono::microseconds turn, Run* run) {
  while (!run->stopping) {
    const auto started = Clock::now();
    try {
      const redlimit::Decision decision = co_await limiter.try_acquire(key);
      if (decision.source != redlimit::Source::redis &&
          decision.source != redlimit::Source::deny_cache) {
        // The failure policy decided: the command may have run in Redis without its admission
        // in the log, so the run proves nothing.
        run->errors.push_back("failure a decision of the failure policy");
      } else if (decision.allowed || decision.source == redlimit::Source::redis) {
        run->decided.push_back({key, decision});
      }
    } catch (const redlimit::PolicyNotFound& e) {
      run->errors.push_back(std::string("not_found ") + e.what());
      if (!std::exchange(run->waiting_marked, true)) std::ofstream(run->out + ".waiting") << "\n";
    } catch (const redlimit::Error& e) {
      run->errors.push_back(std::string("other ") + e.what());
    }
    const auto wake = started + turn;
    if (const auto now = Clock::now(); wake > now) {
      co_await redlimit::sleep_for(
          loop, std::chrono::duration_cast<std::chrono::microseconds>(wake - now));
    }
  }
}

/// Sets run->stopping once `<out>.stop` exists, or after longest_run.
redlimit::Task<void> watch_for_stop(uv_loop_t* loop, Run* run) {
  const auto give_up = Clock::now() + longest_run;
  const std::string stop_file = run->out + ".stop";
  while (access(stop_file.c_str(), F_OK) != 0 && Clock::now() < give_up)
    co_await redlimit::sleep_for(loop, stop_poll);
  run->stopping = true;
}

redlimit::Task<void> follow(uv_loop_t* loop, redlimit::Client& client, redlimit::Limiter& limiter,
                            std::vector<std::string> keys, int coroutines,
                            std::chrono::microseconds turn, Run* run) {
  co_await client.connect();
  redlimit::TaskGroup group;
  group.add(watch_for_stop(loop, run));
  for (const std::string& key : keys) {
    for (int i = 0; i < coroutines; ++i)
      group.add(hammer(loop, limiter, key, turn, run));
  }
  co_await group.join();
  co_await client.close();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr,
                 "usage: fleet_follower <url> <name> <coroutines> <turn_us> <out> <key>...\n");
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  const std::vector<std::string> keys(argv + 6, argv + argc);
  uv_loop_t loop;
  uv_loop_init(&loop);
  Run run;
  run.out = argv[5];
  {
    redlimit::Client client(
        &loop, {.url = argv[1], .command_timeout = 2000ms, .reservation_lease = 6000ms});
    redlimit::Limiter limiter(client, redlimit::LimiterOptions{.name = argv[2]});
    redlimit::run(&loop, follow(&loop, client, limiter, keys, std::stoi(argv[3]),
                                std::chrono::microseconds(std::stoll(argv[4])), &run));
  }
  std::ofstream out(run.out);
  for (const Decided& decided : run.decided) {
    out << (decided.decision.allowed ? "admit " : "deny ") << decided.key << " "
        << decided.decision.server_time_us << (decided.decision.allowed ? " 1 " : " 0 ")
        << decided.decision.policy_version << "\n";
  }
  for (const std::string& error : run.errors)
    out << "error " << error << "\n";
  return uv_loop_close(&loop) == 0 ? 0 : 1;
}
