#include "chaos/fallback_share.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

namespace redlimit::chaos {
namespace {

/// How many lines of each kind the report names; the rest are counted.
constexpr int named_failures = 5;

std::string seconds_into_run(std::int64_t wall_us, std::int64_t run_start_us) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", static_cast<double>(wall_us - run_start_us) / 1e6);
  return text;
}

}  // namespace

std::int64_t fallback_share(const Limit& limit, double share) {
  const bool aligned_windows =
      (limit.algorithm == Algorithm::fixed_window && limit.window == Window::aligned) ||
      limit.algorithm == Algorithm::sliding_window_log ||
      limit.algorithm == Algorithm::sliding_window_counter;
  if (!aligned_windows) return 0;
  // Why computed as the library does (a double product, floored): the documented rounding is
  // "down", and a product such as 99 x (1/3) is only exact in the library's own arithmetic.
  return std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::floor(static_cast<double>(limit.rate.permits) * share)));
}

ShareReport check_fallback_shares(std::string_view stream, const Limit& limit, double share,
                                  const std::vector<FallbackAdmit>& admits,
                                  std::int64_t run_start_us) {
  ShareReport report;
  const std::string name(stream);
  std::int64_t permits = 0;
  for (const FallbackAdmit& admit : admits)
    permits += admit.permits;
  const std::int64_t cap = fallback_share(limit, share);
  if (cap == 0) {
    report.summary = std::to_string(admits.size()) + " admitted by fallback (not checked)";
    return report;
  }
  const std::int64_t period = limit.rate.period.count();
  // (segment, window start) -> process -> permits admitted.
  std::map<std::pair<std::size_t, std::int64_t>, std::map<std::size_t, std::int64_t>> windows;
  long not_placed = 0;
  for (const FallbackAdmit& admit : admits) {
    const std::int64_t start = admit.from_us - admit.from_us % period;
    if (admit.to_us < admit.from_us || admit.to_us >= start + period) {
      ++not_placed;
      continue;
    }
    windows[{admit.segment, start}][admit.process] += admit.permits;
  }
  std::int64_t most_by_one = 0, most_by_fleet = 0;
  long over_share = 0, over_fleet = 0;
  for (const auto& [window, by_process] : windows) {
    const std::string at = seconds_into_run(window.second, run_start_us);
    std::int64_t fleet = 0;
    for (const auto& [process, admitted] : by_process) {
      fleet += admitted;
      most_by_one = std::max(most_by_one, admitted);
      if (admitted > cap && over_share++ < named_failures) {
        report.failures.push_back(name + ": worker " + std::to_string(process) +
                                  "'s local fallback admitted " + std::to_string(admitted) +
                                  " permits in the window at " + at +
                                  " s, more than its share of " + std::to_string(cap));
      }
    }
    most_by_fleet = std::max(most_by_fleet, fleet);
    const auto processes = static_cast<std::int64_t>(by_process.size());
    if (fleet > cap * processes && over_fleet++ < named_failures) {
      report.failures.push_back(name + ": the fleet's local fallbacks admitted " +
                                std::to_string(fleet) + " permits in the window at " + at +
                                " s, more than the shares of its " + std::to_string(processes) +
                                (processes == 1 ? " process (" : " processes (") +
                                std::to_string(cap * processes) + ")");
    }
  }
  if (over_share > named_failures) {
    report.failures.push_back(name + ": " + std::to_string(over_share) +
                              " windows in all where a local fallback passed its share");
  }
  report.summary = std::to_string(admits.size()) + " admitted by fallback (" +
                   std::to_string(permits) + " permits): at most " + std::to_string(most_by_one) +
                   " permits per window by one process (its share: " + std::to_string(cap) +
                   "), at most " + std::to_string(most_by_fleet) +
                   " permits per window by the fleet, " + std::to_string(not_placed) +
                   " not placed (their call spanned two windows)";
  return report;
}

}  // namespace redlimit::chaos
