#include "check.hpp"

#include <algorithm>
#include <cstdint>
#include <map>

namespace algorithm_traces {
namespace {

using redlimit::Algorithm;

/// How many permits (rounded up) the busiest span [t_i, t_j] of admissions holds beyond
/// burst + rate x (t_j - t_i); 0 when the bucket bound holds. With N permits per period P the
/// bound is (j - i + 1) P <= B P + (t_j - t_i) N, that is F(j) - G(i) <= B P with
/// F(j) = (j + 1) P - t_j N and G(i) = i P - t_i N: one pass keeping the least G so far.
std::int64_t bucket_excess(const Trace& trace, const std::vector<std::int64_t>& times) {
  const std::int64_t n = trace.limit.rate.permits;
  const std::int64_t p = trace.limit.rate.period.count();
  const std::int64_t b = trace.limit.burst > 0 ? trace.limit.burst : n;  // 0: rate.permits
  // Why times from the first admission: t N stays far from overflow however long the run.
  const std::int64_t origin = times.empty() ? 0 : times.front();
  std::int64_t excess = 0;
  std::int64_t least_g = 0;
  for (std::size_t j = 0; j < times.size(); ++j) {
    const auto k = static_cast<std::int64_t>(j);
    const std::int64_t t = (times[j] - origin) * n;
    least_g = std::min(least_g, k * p - t);
    excess = std::max(excess, (k + 1) * p - t - least_g - b * p);
  }
  return (excess + p - 1) / p;
}

/// The most permits admitted in one aligned window (windows start at multiples of the period
/// since the epoch).
std::int64_t most_per_window(const Trace& trace, const std::vector<std::int64_t>& times) {
  std::map<std::int64_t, std::int64_t> counts;
  for (const std::int64_t at : times)
    ++counts[at / trace.limit.rate.period.count()];
  std::int64_t most = 0;
  for (const auto& [window, count] : counts)
    most = std::max(most, count);
  return most;
}

/// Adds a fault to `faults` if `value` (of `what`) exceeds `bound`.
void expect_at_most(std::vector<std::string>& faults, const char* what, std::int64_t value,
                    std::int64_t bound) {
  if (value > bound) {
    faults.push_back(std::string(what) + ": " + std::to_string(value) + " > " +
                     std::to_string(bound));
  }
}

}  // namespace

std::vector<std::string> check(const Trace& trace) {
  std::vector<std::string> faults;
  const Summary summary = summarize(trace);
  if (summary.admitted == 0) faults.push_back("no request admitted");
  if (summary.admitted == summary.offered) faults.push_back("no request denied");

  const std::vector<std::int64_t> times = admissions(trace);
  const std::int64_t limit = trace.limit.rate.permits;
  const std::int64_t period = trace.limit.rate.period.count();
  switch (trace.limit.algorithm) {
    case Algorithm::gcra:
    case Algorithm::token_bucket:
      expect_at_most(faults, "permits beyond burst + rate x span", bucket_excess(trace, times), 0);
      break;
    case Algorithm::leaky_bucket:
      if (times.size() > 1 && summary.min_gap_us * limit < period) {
        faults.push_back("admissions " + std::to_string(summary.min_gap_us) +
                         " us apart, less than period / rate");
      }
      break;
    case Algorithm::fixed_window:
      expect_at_most(faults, "permits in one window", most_per_window(trace, times), limit);
      break;
    case Algorithm::sliding_window_log:
      expect_at_most(faults, "permits in one trailing period", summary.most_in_period, limit);
      break;
    case Algorithm::sliding_window_counter:
      expect_at_most(faults, "permits in one window", most_per_window(trace, times), limit);
      expect_at_most(faults, "permits in one trailing period", summary.most_in_period,
                     2 * limit - 1);
      break;
  }
  return faults;
}

}  // namespace algorithm_traces
