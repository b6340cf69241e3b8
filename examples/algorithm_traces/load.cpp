#include "load.hpp"

#include <array>

namespace algorithm_traces {
namespace {

using namespace std::chrono_literals;

/// A span of the cycle during which requests are offered, one every `spacing`.
struct Burst {
  std::chrono::microseconds begin;
  std::chrono::microseconds end;
};

constexpr std::chrono::microseconds cycle = 5s;
constexpr std::chrono::microseconds spacing = 10ms;
constexpr std::array<Burst, 2> bursts{{{0ms, 1900ms}, {3800ms, 4200ms}}};

}  // namespace

std::vector<std::chrono::microseconds> offered_load(std::chrono::seconds length) {
  std::vector<std::chrono::microseconds> load;
  for (std::chrono::microseconds start{0}; start < length; start += cycle) {
    for (const Burst& burst : bursts) {
      for (auto at = start + burst.begin; at < start + burst.end && at < length; at += spacing)
        load.push_back(at);
    }
  }
  return load;
}

}  // namespace algorithm_traces
