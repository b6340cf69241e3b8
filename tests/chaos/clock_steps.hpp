#pragma once
/// @file clock_steps.hpp
/// Finds steps of Redis TIME (the wall clock of the Redis host) in one worker's calls.
///
/// The checker places admissions at Decision::server_time_us (Redis TIME). If the host's wall
/// clock steps back (NTP, a VM resumed), two real seconds fold into one on that axis and a limit
/// looks over-admitted although Redis was right on its own clock. Each call from Redis gives a
/// sample of offset = server time - call end on CLOCK_MONOTONIC: it is at most the true offset
/// (the script ran before the reply was read) and lower by the reply's delay. A step moves the
/// offset's upper envelope for good; a stalled loop lowers it for one batch of late replies.

#include <chrono>
#include <cstdint>
#include <vector>

#include "chaos/call_log.hpp"

namespace redlimit::chaos {

/// How far the offset's upper envelope must move, and stay, to be a clock step: above a round
/// trip on a busy machine, below the 0.4 s step that folds a visible part of a second.
inline constexpr std::chrono::milliseconds clock_step_tolerance_default{200};

/// One step of Redis TIME against CLOCK_MONOTONIC.
struct ClockStep {
  std::int64_t at_ns = 0;    ///< calls ending at or after this are on the new side
  std::int64_t jump_us = 0;  ///< negative: the clock went back
};

/// The steps seen in one worker's calls (any order): the offset's envelope over 100 ms bins
/// moved by more than `tolerance` and stayed there for the two following bins with calls.
std::vector<ClockStep> find_clock_steps(const std::vector<CallRecord>& calls,
                                        std::chrono::milliseconds tolerance);

}  // namespace redlimit::chaos
