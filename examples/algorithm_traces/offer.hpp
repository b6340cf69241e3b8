#pragma once
/// @file offer.hpp
/// Offers the load to every trace at once, on Redis, and records each decision.

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "redlimit/redlimit.hpp"
#include "trace.hpp"

namespace algorithm_traces {

/// The run as Redis saw it.
struct Run {
  /// The start: the window boundary (Redis time, us since the epoch) the load counts from.
  std::int64_t start_us = 0;
  /// The first window boundary after the last decision, departure or offered request.
  std::int64_t end_us = 0;
  /// Requests that failed or were not decided by Redis (each is reported on stderr).
  long errors = 0;
};

/// Connects, resets every trace's key, waits for the next window boundary of Redis time and
/// offers `load` (offsets from that boundary) to every trace at once: at each offset one
/// request per trace, sent together. Records every decision in its trace's samples, waits for
/// every request (queued acquire() calls included) and closes the client.
redlimit::Task<Run> offer(uv_loop_t* loop, redlimit::Client& client, std::vector<Trace>& traces,
                          std::vector<std::chrono::microseconds> load);

}  // namespace algorithm_traces
