#pragma once
/// @file load.hpp
/// The bursty load every trace is offered: the same request times for every algorithm.

#include <chrono>
#include <vector>

namespace algorithm_traces {

/// When requests are offered (one permit each), as offsets from the start of the run, which is
/// a window boundary. The load is a cycle of 5 s, repeated for `length`:
///   [0, 1.9) s    a request every 10 ms (100/s, ten times the limit): steady overload
///   [1.9, 3.8) s  nothing: every bucket refills, every window empties
///   [3.8, 4.2) s  a request every 10 ms: 20 before and 20 after the window boundary at 4 s
///   [4.2, 5) s    nothing
/// Why the overload ends 100 ms before a boundary: a stall of a few milliseconds must not move
/// its last requests into the next window.
std::vector<std::chrono::microseconds> offered_load(std::chrono::seconds length);

}  // namespace algorithm_traces
