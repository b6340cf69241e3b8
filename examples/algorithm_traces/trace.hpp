#pragma once
/// @file trace.hpp
/// A trace: one limit under the load, every decision Redis made on it, and the files gnuplot
/// draws from.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "redlimit/limit.hpp"

namespace algorithm_traces {

/// The rate of every trace: 10 permits per second.
inline constexpr redlimit::Rate rate{10, std::chrono::seconds(1)};
/// The capacity of the buckets (gcra, token_bucket) and the queue of the leaky bucket.
inline constexpr std::int64_t burst = 10;

/// How a trace asks for its permit.
enum class Call {
  try_acquire,  ///< admitted now or denied
  acquire,      ///< queued: admitted at its departure time, denied only if the queue is full
};

/// One offered request and Redis's decision on it.
struct Sample {
  std::int64_t offered_us = 0;  ///< when it was offered (Redis time, us since the epoch)
  /// Decision::server_time_us: when Redis decided; for an admitted acquire(), its departure.
  std::int64_t decided_us = 0;
  bool allowed = false;
};

/// One limit under the load.
struct Trace {
  std::string name;  ///< the data file's name and the Redis key
  redlimit::Limit limit;
  Call call = Call::try_acquire;
  std::string title;  ///< a caption for the picture
  std::vector<Sample> samples;
};

/// The traces: each of the six algorithms with try_acquire(), and the leaky bucket also with
/// acquire(), all at `rate` (and `burst` where it applies).
std::vector<Trace> all_traces();

/// The decision times of the admitted requests (Redis time, us since the epoch), in order.
std::vector<std::int64_t> admissions(const Trace& trace);

/// What a trace shows, in numbers.
struct Summary {
  std::size_t offered = 0;
  std::size_t admitted = 0;
  /// The most permits admitted in any span of one period, (t - period, t].
  std::int64_t most_in_period = 0;
  /// The shortest time between two admissions (0 with fewer than two).
  std::int64_t min_gap_us = 0;
  /// The longest time from an offer to its decision: for try_acquire() the round trip (a few
  /// ms at most on an idle machine; more means the pictures show a stall), for acquire() the
  /// wait in the queue too.
  std::int64_t max_delay_us = 0;
};

/// The numbers of `trace`.
Summary summarize(const Trace& trace);

/// Writes `<dir>/<name>.dat`, times in seconds since `start_us`. Block 0 (gnuplot `index 0`),
/// one row per request by decision time: offered, decided, allowed (0/1), admitted so far.
/// Block 1: the permits admitted in the trailing period (t - period, t] as a step function up
/// to `end_us`, one row per change.
void write_trace(const Trace& trace, std::int64_t start_us, std::int64_t end_us,
                 const std::filesystem::path& dir);

/// Writes `<dir>/params.gp` for traces.gp: the rate, the length of the run, the traces' names,
/// and each trace's algorithm, short label and title.
void write_params(const std::vector<Trace>& traces, std::int64_t start_us, std::int64_t end_us,
                  const std::filesystem::path& dir);

}  // namespace algorithm_traces
