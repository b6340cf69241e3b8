#include "dispatch_settings.hpp"

#include <cmath>

namespace {

using redlimit::Algorithm;

constexpr Algorithm all_algorithms[] = {
    Algorithm::gcra,         Algorithm::token_bucket,       Algorithm::leaky_bucket,
    Algorithm::fixed_window, Algorithm::sliding_window_log, Algorithm::sliding_window_counter};

}  // namespace

std::int64_t limiter_rate(const DispatchSettings& settings) {
  return std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::floor(settings.rate * (1.0 - settings.margin))));
}

std::chrono::microseconds max_lateness(const DispatchSettings& settings) {
  // Permits used up to L after their slot add at most limiter_rate x L to the provider's
  // trailing second, which holds `rate` where the limiter admits limiter_rate + 1 (its burst).
  const double rate = static_cast<double>(limiter_rate(settings));
  const double spare = settings.rate - rate - 1;
  if (spare <= 0) return std::chrono::microseconds::max();
  return std::chrono::microseconds(std::llround(spare / 2 / rate * 1e6));
}

redlimit::Policy dispatch_policy(const DispatchSettings& settings) {
  for (const Algorithm algorithm : all_algorithms) {
    if (redlimit::to_string(algorithm) != settings.algorithm) continue;
    const redlimit::Rate rate{limiter_rate(settings), std::chrono::seconds(1)};
    switch (algorithm) {
      case Algorithm::gcra:
      case Algorithm::token_bucket:
        return redlimit::Policy::of({algorithm, rate, 1});
      case Algorithm::leaky_bucket:
        return redlimit::Policy::of({algorithm, rate, 64 * settings.nodes});
      default:
        return redlimit::Policy::of({algorithm, rate});
    }
  }
  throw redlimit::InvalidArgument("unknown algorithm '" + settings.algorithm + "'");
}

std::vector<std::string> algorithm_names() {
  std::vector<std::string> names;
  for (const Algorithm algorithm : all_algorithms)
    names.emplace_back(redlimit::to_string(algorithm));
  return names;
}

std::int64_t messages_for_node(std::int64_t messages, int nodes, int index) {
  return messages / nodes + (index < messages % nodes ? 1 : 0);
}
