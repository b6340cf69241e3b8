// One process of the policy fleet test: a Limiter made without a policy follows the one stored
// under `name`, and `coroutines` coroutines per key hammer each key for `duration_ms`, each
// asking once per `turn_us`. Writes every admitted decision ("admit <key> <server_time_us>
// <permits> <policy_version>"), every denial decided in Redis ("deny <key> <server_time_us> 0
// <policy_version>") and every error ("error <kind> <what>", kind "not_found" for
// PolicyNotFound, "failure" for a decision of the failure policy, else "other") to `out`.
// Started before any policy is stored, it must fail with PolicyNotFound until one is, never allow.
//
// usage: fleet_follower <redis-url> <name> <coroutines> <turn_us> <duration_ms> <out> <key>...
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

struct Decided {
  std::string key;
  redlimit::Decision decision;
};

struct Log {
  std::vector<Decided> decided;     ///< admitted, or denied in Redis
  std::vector<std::string> errors;  ///< "<kind> <what>"
};

redlimit::Task<void> hammer(uv_loop_t* loop, redlimit::Limiter& limiter, std::string key,
                            Clock::time_point end, std::chrono::microseconds turn, Log* log) {
  while (Clock::now() < end) {
    const auto started = Clock::now();
    try {
      const redlimit::Decision decision = co_await limiter.try_acquire(key);
      if (decision.source != redlimit::Source::redis &&
          decision.source != redlimit::Source::deny_cache) {
        // The failure policy decided: the command may have run in Redis without its admission
        // in the log, so the run proves nothing.
        log->errors.push_back("failure a decision of the failure policy");
      } else if (decision.allowed || decision.source == redlimit::Source::redis) {
        log->decided.push_back({key, decision});
      }
    } catch (const redlimit::PolicyNotFound& e) {
      log->errors.push_back(std::string("not_found ") + e.what());
    } catch (const redlimit::Error& e) {
      log->errors.push_back(std::string("other ") + e.what());
    }
    const auto wake = std::min(started + turn, end);
    if (const auto now = Clock::now(); wake > now) {
      co_await redlimit::sleep_for(
          loop, std::chrono::duration_cast<std::chrono::microseconds>(wake - now));
    }
  }
}

redlimit::Task<void> follow(uv_loop_t* loop, redlimit::Client& client, redlimit::Limiter& limiter,
                            std::vector<std::string> keys, int coroutines,
                            std::chrono::microseconds turn, std::chrono::milliseconds duration,
                            Log* log) {
  co_await client.connect();
  const auto end = Clock::now() + duration;
  redlimit::TaskGroup group;
  for (const std::string& key : keys) {
    for (int i = 0; i < coroutines; ++i)
      group.add(hammer(loop, limiter, key, end, turn, log));
  }
  co_await group.join();
  co_await client.close();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 8) {
    std::fprintf(stderr,
                 "usage: fleet_follower <url> <name> <coroutines> <turn_us> <duration_ms> <out> "
                 "<key>...\n");
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  const std::vector<std::string> keys(argv + 7, argv + argc);
  uv_loop_t loop;
  uv_loop_init(&loop);
  Log log;
  {
    redlimit::Client client(&loop, {.url = argv[1], .command_timeout = 2000ms});
    redlimit::Limiter limiter(client, redlimit::LimiterOptions{.name = argv[2]});
    redlimit::run(&loop, follow(&loop, client, limiter, keys, std::stoi(argv[3]),
                                std::chrono::microseconds(std::stoll(argv[4])),
                                std::chrono::milliseconds(std::stoll(argv[5])), &log));
  }
  std::ofstream out(argv[6]);
  for (const Decided& decided : log.decided) {
    out << (decided.decision.allowed ? "admit " : "deny ") << decided.key << " "
        << decided.decision.server_time_us << (decided.decision.allowed ? " 1 " : " 0 ")
        << decided.decision.policy_version << "\n";
  }
  for (const std::string& error : log.errors)
    out << "error " << error << "\n";
  return uv_loop_close(&loop) == 0 ? 0 : 1;
}
