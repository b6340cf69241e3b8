#include "offer.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <utility>

namespace algorithm_traces {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Limiters = std::vector<std::unique_ptr<redlimit::Limiter>>;

/// The requests in flight and the failed ones, shared by the spawned requests.
struct InFlight {
  int count = 0;
  long errors = 0;
};

/// A reading of Redis TIME and the steady-clock instant it corresponds to.
struct RedisNow {
  std::int64_t redis_us = 0;
  Clock::time_point steady;
};

/// One limiter per trace, all with the same name; each trace's name is its key.
Limiters make_limiters(redlimit::Client& client, const std::vector<Trace>& traces) {
  Limiters limiters;
  for (const Trace& trace : traces) {
    // Why no deny cache: every decision must come from Redis, with Redis's time.
    limiters.push_back(std::make_unique<redlimit::Limiter>(
        client, redlimit::Policy::of(trace.limit),
        redlimit::LimiterOptions{.name = "algorithm_traces", .deny_cache = false}));
  }
  return limiters;
}

/// Reads Redis TIME; its steady-clock instant is the middle of the round trip.
redlimit::Task<RedisNow> redis_now(redlimit::Client& client) {
  const auto before = Clock::now();
  const redlimit::Reply reply = co_await client.command("TIME");
  const auto after = Clock::now();
  const auto& parts = reply.as_array();
  RedisNow now;
  now.redis_us =
      std::stoll(parts.at(0).as_string()) * 1'000'000 + std::stoll(parts.at(1).as_string());
  now.steady = before + (after - before) / 2;
  co_return now;
}

/// Sleeps on the loop until `when`; returns at once if it has passed.
redlimit::Task<void> sleep_until(uv_loop_t* loop, Clock::time_point when) {
  const auto left = std::chrono::ceil<std::chrono::microseconds>(when - Clock::now());
  if (left.count() > 0) co_await redlimit::sleep_for(loop, left);
}

/// One request of `trace`, offered at `offered_us`; its decision goes into the trace.
redlimit::Task<void> request(redlimit::Limiter& limiter, Trace& trace, std::int64_t offered_us,
                             InFlight& in_flight) {
  try {
    redlimit::Decision decision;
    if (trace.call == Call::acquire) {
      decision = co_await limiter.acquire(trace.name);
    } else {
      decision = co_await limiter.try_acquire(trace.name);
    }
    if (decision.source == redlimit::Source::redis) {
      Sample sample;
      sample.offered_us = offered_us;
      sample.decided_us = decision.server_time_us;
      sample.allowed = decision.allowed;
      trace.samples.push_back(sample);
    } else {
      ++in_flight.errors;
      const std::string source(redlimit::to_string(decision.source));
      std::fprintf(stderr, "algorithm_traces: %s: decided by %s, not by Redis\n",
                   trace.name.c_str(), source.c_str());
    }
  } catch (const redlimit::Error& e) {
    ++in_flight.errors;
    std::fprintf(stderr, "algorithm_traces: %s: %s\n", trace.name.c_str(), e.what());
  }
  --in_flight.count;
}

/// Resets the keys, waits for the next window boundary and offers the load; sets run.start_us.
redlimit::Task<void> offer_load(uv_loop_t* loop, redlimit::Client& client,
                                std::vector<Trace>& traces, Limiters& limiters,
                                std::vector<std::chrono::microseconds> load, InFlight& in_flight,
                                Run& run) {
  co_await client.connect();
  for (std::size_t i = 0; i < traces.size(); ++i)
    co_await limiters[i]->reset(traces[i].name);

  // Why a boundary: fixed windows are aligned to the epoch, so the load's offsets line up
  // with the windows. Why 300 ms ahead: time to sleep until it.
  const std::int64_t period = rate.period.count();
  const RedisNow now = co_await redis_now(client);
  run.start_us = (now.redis_us + 300'000 + period - 1) / period * period;
  const Clock::time_point start =
      now.steady + std::chrono::microseconds(run.start_us - now.redis_us);

  for (const std::chrono::microseconds at : load) {
    co_await sleep_until(loop, start + at);
    for (std::size_t i = 0; i < traces.size(); ++i) {
      ++in_flight.count;
      redlimit::spawn(loop, request(*limiters[i], traces[i], run.start_us + at.count(), in_flight));
    }
  }
}

}  // namespace

redlimit::Task<Run> offer(uv_loop_t* loop, redlimit::Client& client, std::vector<Trace>& traces,
                          std::vector<std::chrono::microseconds> load) {
  Run run;
  InFlight in_flight;
  const std::int64_t load_end_us = load.empty() ? 0 : load.back().count();
  std::exception_ptr error;
  {
    Limiters limiters = make_limiters(client, traces);
    try {
      co_await offer_load(loop, client, traces, limiters, std::move(load), in_flight, run);
    } catch (...) {
      error = std::current_exception();
    }
    // Why wait even after an error: the requests in flight use the limiters and the traces.
    while (in_flight.count > 0)
      co_await redlimit::sleep_for(loop, 10ms);
  }
  co_await client.close();
  if (error) std::rethrow_exception(error);

  std::int64_t last_us = run.start_us + load_end_us;
  for (const Trace& trace : traces) {
    for (const Sample& sample : trace.samples)
      last_us = std::max(last_us, sample.decided_us);
  }
  const std::int64_t period = rate.period.count();
  run.end_us = run.start_us + (last_us - run.start_us + period) / period * period;
  run.errors = in_flight.errors;
  co_return run;
}

}  // namespace algorithm_traces
