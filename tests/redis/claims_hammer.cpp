// One process of the claims accuracy test: `coroutines` coroutines on one loop each ask, once per
// turn, for one permit of a user's key (of `users`, in turn) under a per-user limit and of one
// key under a global limit, as one decision (try_acquire_all; with `wait`, acquire_all waiting
// up to 200 ms), for `duration_ms`, offering `offered_per_second` in all; every admission is
// written to `out` as "<server_time_us> <user>".
// The limits: per user gcra 20/s burst 5 ("claims-user"), global gcra 100/s burst 10
// ("claims-global").
//
// usage: claims_hammer <redis-url> <users> <coroutines> <duration_ms> <offered_per_second> <out>
//        [wait]
//
// A decision of a failure policy, or an error, fails the run (exit status 1): the log may then
// miss an admission.
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
  std::vector<std::pair<std::int64_t, int>> admitted;  // server time, user
  long denied_by_user = 0;
  long denied_by_global = 0;
  long errors = 0;
};

struct Limits {
  redlimit::Limiter& per_user;
  redlimit::Limiter& global;
  bool wait = false;  ///< acquire_all, not try_acquire_all
};

redlimit::Task<void> hammer(uv_loop_t* loop, Limits limits, int users, int first_user,
                            Clock::time_point end, std::chrono::microseconds turn, Tally* tally) {
  for (int user = first_user; Clock::now() < end; user = (user + 1) % users) {
    const auto started = Clock::now();
    try {
      // Why built first: g++ 12 cannot compile an initializer list inside a co_await
      // expression ("array used as initializer").
      std::vector<redlimit::Claim> claims{{&limits.per_user, "u" + std::to_string(user)},
                                          {&limits.global, "all"}};
      redlimit::Decision d;
      if (limits.wait) {
        d = co_await redlimit::acquire_all(std::move(claims), {.max_wait = 200ms});
      } else {
        d = co_await redlimit::try_acquire_all(std::move(claims));
      }
      if (d.source != redlimit::Source::redis) {
        ++tally->errors;
        std::fprintf(stderr, "claims_hammer: a decision from the failure policy\n");
      } else if (d.allowed) {
        tally->admitted.emplace_back(d.server_time_us, user);
      } else {
        ++(d.claim == 0 ? tally->denied_by_user : tally->denied_by_global);
      }
    } catch (const redlimit::Error& e) {
      ++tally->errors;
      std::fprintf(stderr, "claims_hammer: %s\n", e.what());
    }
    const auto wake = std::min(started + turn, end);
    if (const auto now = Clock::now(); wake > now) {
      co_await redlimit::sleep_for(
          loop, std::chrono::duration_cast<std::chrono::microseconds>(wake - now));
    }
  }
}

redlimit::Task<void> main_task(uv_loop_t* loop, redlimit::Client& client, Limits limits, int users,
                               int coroutines, std::chrono::milliseconds duration, double offered,
                               Tally* tally) {
  co_await client.connect();
  const auto end = Clock::now() + duration;
  const auto turn =
      std::chrono::microseconds(static_cast<std::int64_t>(coroutines * 1e6 / offered));
  redlimit::TaskGroup group;
  for (int i = 0; i < coroutines; ++i)
    group.add(hammer(loop, limits, users, i % users, end, turn, tally));
  co_await group.join();
  co_await client.close();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7 && !(argc == 8 && std::string(argv[7]) == "wait")) {
    std::fprintf(stderr,
                 "usage: claims_hammer <url> <users> <coroutines> <duration_ms> <offered/s> "
                 "<out> [wait]\n");
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  uv_loop_t loop;
  uv_loop_init(&loop);
  Tally tally;
  {
    redlimit::Client client(&loop, {.url = argv[1], .command_timeout = 2000ms});
    redlimit::Limiter per_user(client, redlimit::Policy::of(redlimit::Limit::gcra({20, 1s}, 5)),
                               {.name = "claims-user"});
    redlimit::Limiter global(client, redlimit::Policy::of(redlimit::Limit::gcra({100, 1s}, 10)),
                             {.name = "claims-global"});
    redlimit::run(&loop,
                  main_task(&loop, client, {per_user, global, argc == 8}, std::stoi(argv[2]),
                            std::stoi(argv[3]), std::chrono::milliseconds(std::stoll(argv[4])),
                            std::stod(argv[5]), &tally));
  }
  std::ofstream out(argv[6]);
  out << "# denied-by-user " << tally.denied_by_user << " denied-by-global "
      << tally.denied_by_global << " errors " << tally.errors << "\n";
  for (const auto& [time, user] : tally.admitted)
    out << time << " " << user << "\n";
  return uv_loop_close(&loop) == 0 && tally.errors == 0 ? 0 : 1;
}
