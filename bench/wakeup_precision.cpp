// Wake-up precision of acquire(): how late a waiting coroutine resumes after the time its
// permits were reserved for (resumed minus reserved), with many waiters queued on one gcra key.
// Redis runs on this host, so its TIME and our clock are one clock. Prints one JSON object per
// line, then a table.
//
// usage: wakeup_precision [--url URL] [--rate N] [--waiters N] [--seconds S]
//        (URL defaults to $REDLIMIT_URL; scripts/with-redis starts a private server)
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "redlimit/redlimit.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::int64_t unix_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Results {
  std::vector<std::int64_t> late_us;
  int running = 0;
  long errors = 0;
};

redlimit::Task<void> waiter(redlimit::Limiter& limiter, Clock::time_point end, Results* results) {
  while (Clock::now() < end) {
    try {
      const redlimit::Decision d = co_await limiter.acquire("bench");
      const std::int64_t resumed = unix_us();
      if (d.allowed && d.waited.count() > 0) results->late_us.push_back(resumed - d.server_time_us);
    } catch (const redlimit::Error& e) {
      ++results->errors;
      std::fprintf(stderr, "wakeup_precision: %s\n", e.what());
    }
  }
  --results->running;
}

redlimit::Task<void> measure(uv_loop_t* loop, redlimit::Client& client, redlimit::Limiter& limiter,
                             int waiters, std::chrono::seconds seconds, Results* results) {
  co_await client.connect();
  const auto end = Clock::now() + seconds;
  results->running = waiters;
  for (int i = 0; i < waiters; ++i)
    redlimit::spawn(loop, waiter(limiter, end, results));
  while (results->running > 0)
    co_await redlimit::sleep_for(loop, 10ms);
  co_await client.close();
}

std::int64_t percentile(std::vector<std::int64_t>& values, double p) {
  if (values.empty()) return 0;
  const auto index = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(index),
                   values.end());
  return values[index];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Wake-up precision of redlimit acquire(): resumed minus reserved time"};
  const char* env_url = std::getenv("REDLIMIT_URL");
  std::string url = env_url != nullptr ? env_url : "redis://127.0.0.1:6379";
  int rate = 200;
  int waiters = 50;
  int seconds = 5;
  app.add_option("--url", url, "Redis URL (default: $REDLIMIT_URL)");
  app.add_option("--rate", rate, "permits per second of the gcra limit")
      ->check(CLI::Range(1, 100000));
  app.add_option("--waiters", waiters, "coroutines queued on the key")->check(CLI::Range(1, 10000));
  app.add_option("--seconds", seconds, "how long to measure")->check(CLI::Range(1, 3600));
  CLI11_PARSE(app, argc, argv);

  uv_loop_t loop;
  uv_loop_init(&loop);
  Results results;
  {
    redlimit::Client client(&loop, {.url = url, .command_timeout = 2s, .reservation_lease = 6s});
    redlimit::Limiter limiter(client,
                              redlimit::Policy::of({redlimit::Algorithm::gcra, {rate, 1s}, 1}),
                              {.name = "wakeup_precision"});
    redlimit::run(
        &loop, measure(&loop, client, limiter, waiters, std::chrono::seconds(seconds), &results));
  }
  const int closed = uv_loop_close(&loop);
  auto& late = results.late_us;
  const std::int64_t p50 = percentile(late, 0.50);
  const std::int64_t p90 = percentile(late, 0.90);
  const std::int64_t p99 = percentile(late, 0.99);
  const std::int64_t worst = late.empty() ? 0 : *std::max_element(late.begin(), late.end());
  std::printf(
      "{\"bench\":\"wakeup_precision\",\"rate\":%d,\"waiters\":%d,\"samples\":%zu,"
      "\"late_us_p50\":%lld,\"late_us_p90\":%lld,\"late_us_p99\":%lld,\"late_us_max\":%lld,"
      "\"errors\":%ld}\n",
      rate, waiters, late.size(), static_cast<long long>(p50), static_cast<long long>(p90),
      static_cast<long long>(p99), static_cast<long long>(worst), results.errors);
  std::printf("\n  acquire() wake-up precision (resumed - reserved), %d/s, %d waiters\n", rate,
              waiters);
  std::printf(
      "  %-10s %10s\n  %-10s %10zu\n  %-10s %8lld us\n  %-10s %8lld us\n  %-10s %8lld us\n"
      "  %-10s %8lld us\n",
      "", "", "samples", late.size(), "p50", static_cast<long long>(p50), "p90",
      static_cast<long long>(p90), "p99", static_cast<long long>(p99), "max",
      static_cast<long long>(worst));
  return closed == 0 && results.errors == 0 ? 0 : 1;
}
