#include "trace.hpp"

#include <algorithm>
#include <fstream>
#include <iomanip>
#include <map>
#include <stdexcept>
#include <utility>

namespace algorithm_traces {
namespace {

using redlimit::Algorithm;

/// A trace of `algorithm` at `rate` (and `burst` where it applies), with no samples yet.
Trace make(std::string name, Algorithm algorithm, Call call) {
  Trace trace;
  trace.limit.algorithm = algorithm;
  trace.limit.rate = rate;
  trace.call = call;
  const bool queued = algorithm == Algorithm::leaky_bucket;
  const bool bucket =
      queued || algorithm == Algorithm::gcra || algorithm == Algorithm::token_bucket;
  if (bucket) trace.limit.burst = burst;
  trace.title = std::string(redlimit::to_string(algorithm)) + ", " + redlimit::to_string(rate);
  if (bucket) trace.title += (queued ? ", queue " : ", burst ") + std::to_string(burst);
  if (algorithm == Algorithm::fixed_window) trace.title += ", aligned windows";
  trace.title += call == Call::acquire ? ", acquire()" : ", try_acquire()";
  trace.name = std::move(name);
  return trace;
}

/// The permits admitted in (t - period, t] as (t, count) at every t where the count changes:
/// each admission at a counts from a until a + period.
std::vector<std::pair<std::int64_t, std::int64_t>> trailing_counts(const Trace& trace) {
  std::map<std::int64_t, std::int64_t> changes;
  for (const std::int64_t at : admissions(trace)) {
    ++changes[at];
    --changes[at + trace.limit.rate.period.count()];
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> counts;
  std::int64_t count = 0;
  for (const auto& [at, change] : changes) {
    count += change;
    counts.emplace_back(at, count);
  }
  return counts;
}

/// `us` as seconds after `start_us`.
double seconds_since(std::int64_t start_us, std::int64_t us) {
  return static_cast<double>(us - start_us) / 1e6;
}

/// Throws if writing `out` (the file at `path`) failed.
void check_written(const std::ofstream& out, const std::filesystem::path& path) {
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

}  // namespace

std::vector<std::int64_t> admissions(const Trace& trace) {
  std::vector<std::int64_t> times;
  for (const Sample& sample : trace.samples)
    if (sample.allowed) times.push_back(sample.decided_us);
  std::sort(times.begin(), times.end());
  return times;
}

std::vector<Trace> all_traces() {
  std::vector<Trace> traces;
  traces.push_back(make("gcra", Algorithm::gcra, Call::try_acquire));
  traces.push_back(make("token_bucket", Algorithm::token_bucket, Call::try_acquire));
  traces.push_back(make("leaky_bucket", Algorithm::leaky_bucket, Call::try_acquire));
  traces.push_back(make("leaky_bucket_acquire", Algorithm::leaky_bucket, Call::acquire));
  traces.push_back(make("fixed_window", Algorithm::fixed_window, Call::try_acquire));
  traces.push_back(make("sliding_window_log", Algorithm::sliding_window_log, Call::try_acquire));
  traces.push_back(
      make("sliding_window_counter", Algorithm::sliding_window_counter, Call::try_acquire));
  return traces;
}

Summary summarize(const Trace& trace) {
  Summary summary;
  summary.offered = trace.samples.size();
  for (const Sample& sample : trace.samples)
    summary.max_delay_us = std::max(summary.max_delay_us, sample.decided_us - sample.offered_us);
  const std::vector<std::int64_t> times = admissions(trace);
  summary.admitted = times.size();
  for (const auto& [at, count] : trailing_counts(trace))
    summary.most_in_period = std::max(summary.most_in_period, count);
  for (std::size_t i = 1; i < times.size(); ++i) {
    const std::int64_t gap = times[i] - times[i - 1];
    if (i == 1 || gap < summary.min_gap_us) summary.min_gap_us = gap;
  }
  return summary;
}

void write_trace(const Trace& trace, std::int64_t start_us, std::int64_t end_us,
                 const std::filesystem::path& dir) {
  std::vector<Sample> samples = trace.samples;
  std::stable_sort(samples.begin(), samples.end(),
                   [](const Sample& a, const Sample& b) { return a.decided_us < b.decided_us; });
  const std::filesystem::path path = dir / (trace.name + ".dat");
  std::ofstream out(path);
  out << std::fixed << std::setprecision(6);
  out << "# " << trace.title << "\n# index 0, one row per request, by decision time\n"
      << "# offered_s decided_s allowed admitted_so_far\n";
  std::int64_t admitted = 0;
  for (const Sample& sample : samples) {
    admitted += sample.allowed ? 1 : 0;
    out << seconds_since(start_us, sample.offered_us) << ' '
        << seconds_since(start_us, sample.decided_us) << ' ' << (sample.allowed ? 1 : 0) << ' '
        << admitted << '\n';
  }
  out << "\n\n# index 1, permits admitted in the trailing period (t - period, t]\n"
      << "# t_s admitted_in_period\n"
      << 0.0 << " 0\n";
  std::int64_t last = 0;
  for (const auto& [at, count] : trailing_counts(trace)) {
    if (at > end_us) break;
    out << seconds_since(start_us, at) << ' ' << count << '\n';
    last = count;
  }
  out << seconds_since(start_us, end_us) << ' ' << last << '\n';
  check_written(out, path);
}

void write_params(const std::vector<Trace>& traces, std::int64_t start_us, std::int64_t end_us,
                  const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "params.gp";
  std::ofstream out(path);
  out << "# Written by algorithm_traces: what traces.gp needs besides the .dat files.\n"
      << "rate = " << rate.permits << "  # permits per period\n"
      << "period = " << seconds_since(0, rate.period.count()) << "  # seconds\n"
      << "burst = " << burst << "\n"
      << "duration = " << seconds_since(start_us, end_us) << "  # seconds: the length of the run\n"
      << "traces = \"";
  for (std::size_t i = 0; i < traces.size(); ++i)
    out << (i > 0 ? " " : "") << traces[i].name;
  out << "\"\n";
  for (const Trace& trace : traces) {
    const std::string algorithm(redlimit::to_string(trace.limit.algorithm));
    out << "algorithm_" << trace.name << " = \"" << algorithm << "\"\n"
        << "label_" << trace.name << " = \"" << algorithm
        << (trace.call == Call::acquire ? " acquire()" : "") << "\"\n"
        << "title_" << trace.name << " = \"" << trace.title << "\"\n";
  }
  check_written(out, path);
}

}  // namespace algorithm_traces
