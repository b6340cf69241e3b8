#pragma once
/// @file check.hpp
/// Checks a trace against its algorithm's guarantee (the table in docs/algorithms.md), so that
/// a run whose pictures would show a broken limit fails instead.

#include <string>
#include <vector>

#include "trace.hpp"

namespace algorithm_traces {

/// What is wrong with `trace`, one readable line per fault; empty if nothing. On the decision
/// times of its admissions (Redis time):
/// - gcra, token_bucket: permits in every span [a, b] <= burst + rate x (b - a);
/// - leaky_bucket: admissions (for acquire(), departures) at least period / rate apart;
/// - fixed_window: permits per aligned window <= limit;
/// - sliding_window_log: permits in every trailing period (t - period, t] <= limit;
/// - sliding_window_counter: permits per aligned window <= limit, and in every trailing period
///   <= 2 x limit - 1.
/// And that the load both got admissions and was denied some: a trace without either shows
/// nothing of its algorithm.
std::vector<std::string> check(const Trace& trace);

}  // namespace algorithm_traces
