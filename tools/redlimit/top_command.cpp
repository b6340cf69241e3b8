#include "top_command.hpp"

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "exit_status.hpp"
#include "output.hpp"
#include "redlimit/task_group.hpp"
#include "table.hpp"
#include "text_format.hpp"

namespace redlimit_cli {
namespace {

/// Keys inspected at once: enough to fill the client's script batches, few enough to stay far
/// below max_pending.
constexpr std::size_t inspections_at_once = 64;

/// remaining / capacity of one limit (0 for a capacity of 0, which no valid limit has).
double fraction_left(const redlimit::Decision& state) {
  return state.limit > 0 ? static_cast<double>(state.remaining) / static_cast<double>(state.limit)
                         : 0.0;
}

/// The nearest limit's state of `key`.
const redlimit::Decision& nearest_state(const KeyState& key) {
  return key.limits.at(key.nearest).state;
}

/// When the key's next one-permit request could pass: its longest limit's retry_after.
std::chrono::microseconds retry_after(const KeyState& key) {
  std::chrono::microseconds longest{0};
  for (const redlimit::LimitState& limit : key.limits)
    longest = std::max(longest, limit.state.retry_after);
  return longest;
}

/// Rounded down: 100% only once nothing is left. Why in integers: in floating point, 1 of 10
/// used came out as 9.999...%.
int percent_used(const redlimit::Decision& state) {
  if (state.limit <= 0) return 100;
  const std::int64_t used = std::clamp<std::int64_t>(state.limit - state.remaining, 0, state.limit);
  return static_cast<int>(used * 100 / state.limit);
}

redlimit::Task<void> inspect_into(redlimit::Limiter& limiter, KeyState* out) {
  out->limits = co_await limiter.inspect(out->key);
  out->nearest = nearest_limit(out->limits);
}

/// Inspects `keys`, inspections_at_once at a time, until a stop: the keys inspected.
redlimit::Task<std::vector<KeyState>> inspect_all(redlimit::Limiter& limiter,
                                                  std::vector<std::string> keys,
                                                  std::stop_token stop) {
  std::vector<KeyState> states(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i)
    states[i].key = std::move(keys[i]);
  std::size_t inspected = 0;
  while (inspected < states.size() && !stop.stop_requested()) {
    const std::size_t end = std::min(states.size(), inspected + inspections_at_once);
    redlimit::TaskGroup group;
    for (std::size_t i = inspected; i < end; ++i)
      group.add(inspect_into(limiter, &states[i]));
    co_await group.join();
    inspected = end;
  }
  states.resize(inspected);
  co_return states;
}

/// True when a stop ended the sample or its inspections early.
bool interrupted(const KeySample& sample, std::size_t inspected) {
  return sample.interrupted || inspected < sample.keys.size();
}

std::string sampled_text(const KeySample& sample, std::size_t inspected) {
  if (interrupted(sample, inspected)) {
    return std::to_string(inspected) + " of " + std::to_string(sample.keys.size()) +
           " keys (interrupted)";
  }
  return std::to_string(inspected) +
         (sample.complete ? " keys (all)" : " keys (a sample: --sample, --scan-limit)");
}

std::string top_text(const TopRequest& request, const KeySample& sample, std::size_t inspected,
                     const std::vector<KeyState>& nearest) {
  std::vector<std::pair<std::string, std::string>> fields{
      {"name", printable(request.name)}, {"sampled", sampled_text(sample, inspected)}};
  if (sample.digests > 0) {
    fields.emplace_back("skipped",
                        std::to_string(sample.digests) + " long keys (stored as digests)");
  }
  Table table({{"KEY"},
               {"LIMIT"},
               {"REMAINING", true},
               {"CAPACITY", true},
               {"USED", true},
               {"RETRY AFTER", true},
               {"RESET AFTER", true}});
  for (const KeyState& key : nearest) {
    const redlimit::LimitState& limit = key.limits.at(key.nearest);
    table.add_row({printable(key.key), redlimit::to_string(limit.limit),
                   std::to_string(limit.state.remaining), std::to_string(limit.state.limit),
                   std::to_string(percent_used(limit.state)) + "%",
                   format_duration(retry_after(key)), format_duration(limit.state.reset_after)});
  }
  return render_fields(fields) + "\n" + table.render();
}

void print_top_json(const TopRequest& request, const KeySample& sample, std::size_t inspected,
                    const std::vector<KeyState>& nearest) {
  JsonWriter json;
  json.begin_object();
  json.key("name").string(request.name);
  json.key("sampled").integer(static_cast<std::int64_t>(inspected));
  json.key("complete").boolean(sample.complete && inspected == sample.keys.size());
  json.key("interrupted").boolean(interrupted(sample, inspected));
  json.key("digest_keys").integer(static_cast<std::int64_t>(sample.digests));
  json.key("keys").begin_array();
  for (const KeyState& key : nearest) {
    const redlimit::LimitState& limit = key.limits.at(key.nearest);
    json.begin_object();
    json.key("key").string(key.key);
    json.key("limit").string(redlimit::to_string(limit.limit));
    json.key("limit_index").integer(static_cast<std::int64_t>(key.nearest));
    json.key("remaining").integer(limit.state.remaining);
    json.key("capacity").integer(limit.state.limit);
    json.key("fraction_left").real(fraction_left(limit.state));
    json.key("allowed").boolean(retry_after(key).count() == 0);
    json.key("retry_after_us").integer(retry_after(key).count());
    json.key("reset_after_us").integer(limit.state.reset_after.count());
    json.end_object();
  }
  json.end_array();
  json.end_object();
  print_json(json);
}

}  // namespace

std::size_t nearest_limit(const std::vector<redlimit::LimitState>& limits) {
  std::size_t nearest = 0;
  for (std::size_t i = 1; i < limits.size(); ++i) {
    const redlimit::Decision& candidate = limits[i].state;
    const redlimit::Decision& best = limits[nearest].state;
    if (std::make_tuple(fraction_left(candidate), -candidate.retry_after.count()) <
        std::make_tuple(fraction_left(best), -best.retry_after.count())) {
      nearest = i;
    }
  }
  return nearest;
}

void sort_nearest_first(std::vector<KeyState>& keys) {
  const auto order = [](const KeyState& key) {
    return std::make_tuple(fraction_left(nearest_state(key)), -retry_after(key).count(),
                           std::string_view(key.key));
  };
  std::sort(keys.begin(), keys.end(),
            [&](const KeyState& a, const KeyState& b) { return order(a) < order(b); });
}

redlimit::Task<int> top_keys(redlimit::Client& client, GlobalOptions global, TopRequest request,
                             std::stop_token stop) {
  if (global.url.starts_with("redis-cluster://")) {
    throw CommandError(exit_usage,
                       "top does not work on a Redis Cluster: it samples keys by SCAN, which a "
                       "cluster runs per node");
  }
  const KeySample sample =
      co_await sample_keys(client, global.prefix, request.name, request.sample, stop);
  redlimit::Limiter limiter(
      client, redlimit::LimiterOptions{.name = request.name, .prefix = global.prefix});
  std::vector<KeyState> nearest = co_await inspect_all(limiter, sample.keys, stop);
  const std::size_t inspected = nearest.size();
  sort_nearest_first(nearest);
  if (nearest.size() > request.count) nearest.resize(request.count);
  if (global.json) {
    print_top_json(request, sample, inspected, nearest);
  } else {
    print_out(top_text(request, sample, inspected, nearest));
  }
  co_return exit_ok;
}

}  // namespace redlimit_cli
