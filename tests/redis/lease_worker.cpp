// One process of the semaphore tests.
//   hold:  takes one lease and writes "held <expiry_us>" to `out`, then sleeps until killed.
//   churn: `coroutines` coroutines take leases for `duration_ms`, hold them 1-30 ms, and then
//          release them, renew and release them, or let them expire first; every lease is
//          written to `out` as "<granted_us> <end_us> <permits>", where end is when its permits
//          became free: the server time of the release, or the expiry.
//
// usage: lease_worker hold <url> <capacity> <ttl_ms> <out>
//        lease_worker churn <url> <capacity> <ttl_ms> <out> <coroutines> <duration_ms>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "redlimit/redlimit.hpp"
#include "redlimit/task_group.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Held {
  std::int64_t granted_us;
  std::int64_t end_us;
  std::int64_t permits;
};

redlimit::Task<void> hold(redlimit::Client& client, redlimit::Semaphore& semaphore,
                          std::string out) {
  co_await client.connect();
  redlimit::Lease lease = co_await semaphore.acquire("job");
  {
    std::ofstream file(out);
    file << "held " << lease.expires_at_us() << "\n";
  }
  for (;;)
    co_await redlimit::sleep_for(client.loop(), 1h);
}

redlimit::Task<void> churn_one(uv_loop_t* loop, redlimit::Semaphore& semaphore,
                               Clock::time_point end, std::uint64_t seed, std::vector<Held>* held,
                               long* errors) {
  std::mt19937_64 random(seed);
  while (Clock::now() < end) {
    try {
      redlimit::AcquireOptions options;
      options.max_wait = 2s;
      const std::int64_t permits = std::uniform_int_distribution<std::int64_t>(1, 2)(random);
      redlimit::Lease lease = co_await semaphore.acquire("job", permits, options);
      if (!lease) continue;                                          // not within max_wait
      const std::int64_t granted = lease.expires_at_us() - 200'000;  // ttl is 200 ms
      co_await redlimit::sleep_for(
          loop, std::chrono::milliseconds(std::uniform_int_distribution<int>(1, 30)(random)));
      const int choice = std::uniform_int_distribution<int>(0, 9)(random);
      if (choice < 2) {  // let it expire, then release late (harmless)
        co_await redlimit::sleep_for(loop, 230ms);
      } else if (choice < 4) {
        // A renewal after the expiry (the grant's reply came late on a busy machine) is refused:
        // the lease ended at its expiry, as the record below says.
        bool renewed = true;
        try {
          co_await lease.renew();
        } catch (const redlimit::LeaseExpired&) {
          renewed = false;
        }
        if (renewed) co_await redlimit::sleep_for(loop, 10ms);
      }
      const std::int64_t expiry = lease.expires_at_us();
      co_await lease.release();
      const std::int64_t released = lease.released_at_us();
      held->push_back({granted, released != 0 ? std::min(released, expiry) : expiry, permits});
    } catch (const redlimit::Error& e) {
      ++*errors;
      std::fprintf(stderr, "lease_worker: %s\n", e.what());
    }
  }
}

redlimit::Task<void> churn(uv_loop_t* loop, redlimit::Client& client,
                           redlimit::Semaphore& semaphore, int coroutines,
                           std::chrono::milliseconds duration, std::vector<Held>* held,
                           long* errors) {
  co_await client.connect();
  const auto end = Clock::now() + duration;
  redlimit::TaskGroup group;
  std::random_device seeds;
  for (int i = 0; i < coroutines; ++i) {
    group.add(churn_one(loop, semaphore, end, seeds(), held, errors));
  }
  co_await group.join();
  co_await client.close();  // after the background releases
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: lease_worker hold|churn <url> <capacity> <ttl_ms> <out> ...\n");
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  const std::string mode = argv[1];
  uv_loop_t loop;
  uv_loop_init(&loop);
  std::vector<Held> held;
  long errors = 0;
  {
    redlimit::Client client(&loop,
                            {.url = argv[2], .command_timeout = 2000ms, .reservation_lease = 0ms});
    redlimit::Semaphore semaphore(client, std::stoll(argv[3]), "workers",
                                  std::chrono::milliseconds(std::stoll(argv[4])));
    if (mode == "hold") {
      redlimit::run(&loop, hold(client, semaphore, argv[5]));
    } else {
      redlimit::run(&loop, churn(&loop, client, semaphore, std::stoi(argv[6]),
                                 std::chrono::milliseconds(std::stoll(argv[7])), &held, &errors));
    }
  }
  std::ofstream out(argv[5]);
  for (const Held& h : held)
    out << h.granted_us << " " << h.end_us << " " << h.permits << "\n";
  return uv_loop_close(&loop) == 0 && errors == 0 ? 0 : 1;
}
