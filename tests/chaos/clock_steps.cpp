#include "chaos/clock_steps.hpp"

#include <algorithm>
#include <cstdlib>

namespace redlimit::chaos {
namespace {

constexpr std::int64_t bin_ns = 100'000'000;
constexpr int confirming_bins = 2;

struct Sample {
  std::int64_t end_ns;
  std::int64_t offset_us;
};

struct Bin {
  std::size_t first;  ///< index of its first sample
  std::size_t end;    ///< one past its last
  std::int64_t envelope_us;
};

std::vector<Sample> samples_of(const std::vector<CallRecord>& calls) {
  std::vector<Sample> samples;
  for (const CallRecord& r : calls) {
    // Why only single, unwaited decisions from Redis: their server time is when the script ran;
    // a waited acquire's is computed, a merged run has none.
    if (r.source != "redis" || r.server_us == 0 || r.count != 1 || r.waited_us != 0) continue;
    samples.push_back({r.end_ns, r.server_us - r.end_ns / 1000});
  }
  std::sort(samples.begin(), samples.end(),
            [](const Sample& a, const Sample& b) { return a.end_ns < b.end_ns; });
  return samples;
}

std::vector<Bin> bins_of(const std::vector<Sample>& samples) {
  std::vector<Bin> bins;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (bins.empty() || samples[i].end_ns / bin_ns != samples[bins.back().first].end_ns / bin_ns) {
      bins.push_back({i, i + 1, samples[i].offset_us});
    } else {
      bins.back().end = i + 1;
      bins.back().envelope_us = std::max(bins.back().envelope_us, samples[i].offset_us);
    }
  }
  return bins;
}

}  // namespace

std::vector<ClockStep> find_clock_steps(const std::vector<CallRecord>& calls,
                                        std::chrono::milliseconds tolerance) {
  const std::int64_t tolerance_us = std::chrono::microseconds(tolerance).count();
  const std::vector<Sample> samples = samples_of(calls);
  const std::vector<Bin> bins = bins_of(samples);
  std::vector<ClockStep> steps;
  if (bins.empty()) return steps;
  std::int64_t level = bins.front().envelope_us;
  for (std::size_t k = 1; k < bins.size(); ++k) {
    const std::int64_t envelope = bins[k].envelope_us;
    if (std::llabs(envelope - level) <= tolerance_us) {
      level = envelope;
      continue;
    }
    if (k + confirming_bins >= bins.size()) break;
    bool stays = true;
    for (int c = 1; c <= confirming_bins; ++c)
      stays = stays && std::llabs(bins[k + c].envelope_us - envelope) <= tolerance_us;
    if (!stays) continue;  // one batch of late replies: a stalled loop, not a step
    // The step is after the last sample of the previous bin and this one nearer the old level.
    std::int64_t at_ns = samples[bins[k - 1].first].end_ns;
    for (std::size_t i = bins[k - 1].first; i < bins[k].end; ++i) {
      if (std::llabs(samples[i].offset_us - level) < std::llabs(samples[i].offset_us - envelope))
        at_ns = samples[i].end_ns + 1;
    }
    steps.push_back({at_ns, envelope - level});
    level = envelope;
  }
  return steps;
}

}  // namespace redlimit::chaos
