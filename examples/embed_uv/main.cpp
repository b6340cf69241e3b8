// embed_uv: an existing libuv application (job_producer.*: a timer hands out jobs, no
// coroutines anywhere) that adds redlimit through its callback-style API. Jobs arrive faster
// than each tenant may run them; each job waits for its tenant's permit, then runs, or is
// dropped when the wait would exceed --max-wait-ms.
//
// usage: embed_uv [--redis URL | --local] [--jobs N] [--every-ms MS] [--tenants K]
//                 [--rate RATE] [--burst B] [--max-wait-ms MS]
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>

#include "job_producer.hpp"
#include "redlimit/redlimit.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Tally {
  int ran = 0;
  int dropped = 0;
  int failed = 0;
  std::map<std::string, int> ran_per_tenant;
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A timer-driven libuv job producer, rate limited per tenant with redlimit"};
  const char* env_url = std::getenv("REDLIMIT_URL");
  std::string url = env_url != nullptr ? env_url : "redis://127.0.0.1:6379";
  bool local = false;
  int jobs = 30;
  int every_ms = 20;
  int tenants = 3;
  std::string rate = "5/s";
  std::int64_t burst = 1;
  int max_wait_ms = 10'000;
  app.add_option("--redis", url, "Redis URL (default: $REDLIMIT_URL)");
  app.add_flag("--local", local, "limit in this process only (no Redis)");
  app.add_option("--jobs", jobs, "jobs to produce")->check(CLI::Range(1, 1'000'000));
  app.add_option("--every-ms", every_ms, "one job every this many ms")
      ->check(CLI::Range(1, 60'000));
  app.add_option("--tenants", tenants, "tenants the jobs belong to")->check(CLI::Range(1, 10'000));
  app.add_option("--rate", rate, "each tenant's rate, e.g. 5/s, 100/min");
  app.add_option("--burst", burst, "permits a tenant may take at once after idling")
      ->check(CLI::Range(1, 1'000'000));
  app.add_option("--max-wait-ms", max_wait_ms, "drop a job that would wait longer")
      ->check(CLI::Range(0, 3'600'000));
  CLI11_PARSE(app, argc, argv);

  uv_loop_t loop;
  uv_loop_init(&loop);
  Tally tally;
  const auto started = Clock::now();
  try {
    const redlimit::Policy policy{redlimit::Limit::gcra(rate, burst)};
    std::optional<redlimit::Client> client;
    std::optional<redlimit::Limiter> limiter;
    if (local) {
      limiter.emplace(&loop, policy, redlimit::LimiterOptions{.name = "embed_uv"});
    } else {
      client.emplace(&loop, redlimit::ClientOptions{.url = url});
      limiter.emplace(*client, policy, redlimit::LimiterOptions{.name = "embed_uv"});
    }

    // The whole integration: the producer's callback asks for a permit and runs the job in the
    // limiter's callback. When the last job is accounted for, the client is closed.
    auto finish_one = [&] {
      if (tally.ran + tally.dropped + tally.failed < jobs || !client) return;
      redlimit::start(&loop, client->close(), [](redlimit::Result<void> closed) {
        if (!closed.ok()) std::fprintf(stderr, "close: %s\n", closed.error_message().c_str());
      });
    };
    const redlimit::AcquireOptions wait{.max_wait = std::chrono::milliseconds(max_wait_ms)};
    JobProducer producer(&loop, std::chrono::milliseconds(every_ms), jobs, tenants, [&](Job job) {
      limiter->acquire(job.tenant, 1, wait, [&, job](redlimit::Result<redlimit::Decision> r) {
        if (!r.ok()) {
          ++tally.failed;
          std::fprintf(stderr, "job %d (%s) failed: %s\n", job.id, job.tenant.c_str(),
                       r.error_message().c_str());
        } else if (!r.value().allowed) {
          ++tally.dropped;
          std::printf("%7.3f s  job %3d  %-10s dropped: would wait %lld ms\n",
                      seconds_since(started), job.id, job.tenant.c_str(),
                      static_cast<long long>(r.value().retry_after.count() / 1000));
        } else {
          ++tally.ran;
          ++tally.ran_per_tenant[job.tenant];
          std::printf("%7.3f s  job %3d  %-10s ran after waiting %lld ms\n", seconds_since(started),
                      job.id, job.tenant.c_str(),
                      static_cast<long long>(r.value().waited.count() / 1000));
        }
        finish_one();
      });
    });
    producer.start();
    uv_run(&loop, UV_RUN_DEFAULT);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "embed_uv: %s\n", e.what());
    return 2;
  }
  uv_run(&loop, UV_RUN_DEFAULT);  // the handles closed on the way out

  std::printf("ran %d of %d jobs, dropped %d, failed %d, in %.2f s; per tenant (%s):", tally.ran,
              jobs, tally.dropped, tally.failed, seconds_since(started), rate.c_str());
  for (const auto& [tenant, count] : tally.ran_per_tenant)
    std::printf(" %s %d", tenant.c_str(), count);
  std::printf("\n");
  const bool closed = uv_loop_close(&loop) == 0;
  if (!closed) std::fprintf(stderr, "embed_uv: a uv handle was left open\n");
  return closed && tally.failed == 0 && tally.ran + tally.dropped == jobs ? 0 : 1;
}
