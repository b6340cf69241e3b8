#include "bench_case.hpp"

#include <sys/resource.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "allocation_counter.hpp"
#include "decide_command.hpp"
#include "latencies.hpp"
#include "policy/key_format.hpp"
#include "redis/key_slot.hpp"
#include "server_stats.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Tally {
  Latencies latencies;
  std::int64_t allowed = 0;
  std::int64_t errors = 0;
};

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

/// A small fast generator, one per worker: picking keys must cost next to nothing.
struct XorShift {
  std::uint64_t state;
  std::uint64_t next() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  }
};

/// Decides keys drawn uniformly from `keys` indices, or from `indices` when it is not empty.
redlimit::Task<void> worker(redlimit::Limiter& limiter, Clock::time_point end, int keys,
                            const std::vector<std::uint64_t>& indices, std::uint64_t seed,
                            Tally* tally) {
  XorShift random{seed * 0x9E3779B97F4A7C15ULL + 1};
  // Why one clock reading per decision: the end of one is the start of the next.
  auto started = Clock::now();
  while (started < end) {
    const std::uint64_t drawn = random.next() % static_cast<std::uint64_t>(keys);
    const std::string key = bench_key(indices.empty() ? drawn : indices[drawn]);
    try {
      const redlimit::Decision d = co_await limiter.try_acquire(key);
      if (d.allowed) ++tally->allowed;
    } catch (const redlimit::Error& e) {
      if (tally->errors++ == 0) std::fprintf(stderr, "redlimit_bench: %s\n", e.what());
    }
    const auto finished = Clock::now();
    tally->latencies.add((finished - started).count());
    started = finished;
  }
}

}  // namespace

const char* const bench_prefix = "rlbench";

redlimit::Policy bench_policy(redlimit::Algorithm algorithm, std::chrono::milliseconds period) {
  return redlimit::Policy::of({algorithm, {1000, period}, 1000});
}

std::vector<std::uint64_t> indices_in_slots(const std::string& name, int count, std::uint16_t first,
                                            std::uint16_t last) {
  namespace detail = redlimit::detail;
  const std::string escaped = detail::escape_key_part(name);
  std::vector<std::uint64_t> indices;
  for (std::uint64_t index = 0; indices.size() < static_cast<std::size_t>(count); ++index) {
    const std::uint16_t slot =
        detail::key_slot(detail::key_base(bench_prefix, escaped, bench_key(index)).str());
    if (slot >= first && slot <= last) indices.push_back(index);
  }
  return indices;
}

std::string bench_key(std::uint64_t index) {
  // Why not snprintf: it took about 5% of this process's CPU per decision.
  std::string key(13, '0');
  key[0] = 'k';
  for (std::size_t digit = 12; digit > 0 && index > 0; --digit, index /= 10)
    key[digit] = static_cast<char>('0' + index % 10);
  return key;
}

redlimit::Task<BenchResult> run_case(uv_loop_t* loop, redlimit::ClientOptions connection,
                                     redlimit::Client& admin, BenchCase config) {
  connection.max_batch = static_cast<std::size_t>(config.max_batch);
  const std::string name = "bench-" + std::string(redlimit::to_string(config.algorithm));
  std::vector<std::unique_ptr<redlimit::Client>> clients;
  std::vector<std::unique_ptr<redlimit::Limiter>> limiters;
  for (int i = 0; i < config.connections; ++i) {
    clients.push_back(std::make_unique<redlimit::Client>(loop, connection));
    limiters.push_back(std::make_unique<redlimit::Limiter>(
        *clients.back(), bench_policy(config.algorithm, config.period),
        redlimit::LimiterOptions{.name = name, .prefix = bench_prefix, .deny_cache = false}));
    co_await clients.back()->connect();
    co_await limiters.back()->try_acquire(bench_key(0));  // loads the script
  }
  const std::vector<std::uint64_t> indices =
      config.slots ? indices_in_slots(name, config.keys, config.slots->first, config.slots->second)
                   : std::vector<std::uint64_t>{};

  Tally tally;
  tally.latencies.reserve(static_cast<std::size_t>(config.seconds * 200'000));
  co_await reset_server_stats(admin);
  const double cpu_before = cpu_seconds();
  const auto allocations_before = allocations_so_far();
  const auto started = Clock::now();
  const auto end = started + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(config.seconds));
  {
    redlimit::TaskGroup workers;
    for (int i = 0; i < config.in_flight; ++i) {
      workers.add(worker(*limiters[static_cast<std::size_t>(i % config.connections)], end,
                         config.keys, indices, static_cast<std::uint64_t>(i), &tally));
    }
    co_await workers.join();
  }
  const auto allocations_after = allocations_so_far();
  BenchResult result;
  result.config = config;
  result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  result.decisions = static_cast<std::int64_t>(tally.latencies.count());
  result.allowed = tally.allowed;
  result.errors = tally.errors;
  const double decisions = static_cast<double>(std::max<std::int64_t>(1, result.decisions));
  result.client_cpu_us = (cpu_seconds() - cpu_before) * 1e6 / decisions;
  result.per_second = static_cast<double>(result.decisions) / result.seconds;
  result.p50_us = tally.latencies.quantile_us(0.5);
  result.p99_us = tally.latencies.quantile_us(0.99);
  result.p999_us = tally.latencies.quantile_us(0.999);
  if (allocations_before && allocations_after) {
    result.allocations_per_decision =
        static_cast<double>(*allocations_after - *allocations_before) / decisions;
  }
  if (const auto evalsha = co_await evalsha_stats(admin); evalsha && evalsha->calls > 0) {
    result.server_usec_per_call = evalsha->usec_per_call;
    result.server_usec_per_decision = static_cast<double>(evalsha->usec) / decisions;
    result.mean_batch = decisions / static_cast<double>(evalsha->calls);
  }
  std::vector<std::string> sample;
  for (std::uint64_t i = 0; i < std::min<std::uint64_t>(20, config.keys); ++i)
    sample.push_back(decide_command(bench_policy(config.algorithm, config.period), bench_prefix,
                                    name, bench_key(i))
                         .arguments[1]);
  result.key_bytes = co_await mean_key_bytes(admin, std::move(sample));
  for (auto& client : clients)
    co_await client->close();
  co_return result;
}
