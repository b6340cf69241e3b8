#include "top_command.hpp"

#include <algorithm>
#include <tuple>

#include "exit_status.hpp"
#include "key_sample.hpp"
#include "output.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/task_group.hpp"
#include "table.hpp"
#include "text_format.hpp"

namespace redlimit_cli {
namespace {

/// Peeks in flight at once: enough to fill the client's script batches, few enough to stay
/// far below max_pending.
constexpr std::size_t peeks_at_once = 64;

double fraction_left(const redlimit::Decision& state) {
  return state.limit > 0 ? static_cast<double>(state.remaining) / static_cast<double>(state.limit)
                         : 0.0;
}

int percent_used(const redlimit::Decision& state) {
  return static_cast<int>((1.0 - fraction_left(state)) * 100.0 + 0.5);
}

bool answered_by_redis(const redlimit::Decision& state) {
  return state.source == redlimit::Source::redis || state.source == redlimit::Source::deny_cache;
}

redlimit::Task<void> peek_into(redlimit::Limiter& limiter, KeyState* out) {
  out->state = co_await limiter.peek(out->key);
}

redlimit::Task<std::vector<KeyState>> peek_all(redlimit::Limiter& limiter,
                                               std::vector<std::string> keys,
                                               std::stop_token stop) {
  std::vector<KeyState> states(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i)
    states[i].key = std::move(keys[i]);
  for (std::size_t first = 0; first < states.size() && !stop.stop_requested();
       first += peeks_at_once) {
    redlimit::TaskGroup group;
    for (std::size_t i = first; i < std::min(states.size(), first + peeks_at_once); ++i)
      group.add(peek_into(limiter, &states[i]));
    co_await group.join();
  }
  for (const KeyState& key : states) {
    // Why: a limiter answers with its failure policy when Redis cannot; that is no state.
    if (!answered_by_redis(key.state)) {
      throw CommandError(exit_unavailable,
                         "Redis did not answer the peek of " + printable(key.key) + " (" +
                             std::string(redlimit::to_string(key.state.source)) + ")");
    }
  }
  co_return states;
}

std::string top_text(const TopRequest& request, const KeySample& sample,
                     const std::vector<KeyState>& nearest) {
  std::vector<std::pair<std::string, std::string>> fields{
      {"name", printable(request.name)},
      {"sampled", std::to_string(sample.keys.size()) +
                      (sample.complete ? " keys (all)" : " keys (a sample: --sample)")}};
  if (sample.digests > 0) {
    fields.emplace_back("skipped",
                        std::to_string(sample.digests) + " long keys (stored as digests)");
  }
  Table table({{"KEY"},
               {"REMAINING", true},
               {"CAPACITY", true},
               {"USED", true},
               {"RETRY AFTER", true},
               {"RESET AFTER", true}});
  for (const KeyState& key : nearest) {
    table.add_row({printable(key.key), std::to_string(key.state.remaining),
                   std::to_string(key.state.limit), std::to_string(percent_used(key.state)) + "%",
                   format_duration(key.state.retry_after), format_duration(key.state.reset_after)});
  }
  return render_fields(fields) + "\n" + table.render();
}

void print_top_json(const TopRequest& request, const KeySample& sample,
                    const std::vector<KeyState>& nearest) {
  JsonWriter json;
  json.begin_object();
  json.key("name").string(request.name);
  json.key("sampled").integer(static_cast<std::int64_t>(sample.keys.size()));
  json.key("complete").boolean(sample.complete);
  json.key("digest_keys").integer(static_cast<std::int64_t>(sample.digests));
  json.key("keys").begin_array();
  for (const KeyState& key : nearest) {
    json.begin_object();
    json.key("key").string(key.key);
    json.key("remaining").integer(key.state.remaining);
    json.key("capacity").integer(key.state.limit);
    json.key("fraction_left").real(fraction_left(key.state));
    json.key("allowed").boolean(key.state.allowed);
    json.key("retry_after_us").integer(key.state.retry_after.count());
    json.key("reset_after_us").integer(key.state.reset_after.count());
    json.key("binding").integer(static_cast<std::int64_t>(key.state.binding));
    json.end_object();
  }
  json.end_array();
  json.end_object();
  print_json(json);
}

}  // namespace

void sort_nearest_first(std::vector<KeyState>& keys) {
  std::sort(keys.begin(), keys.end(), [](const KeyState& a, const KeyState& b) {
    return std::make_tuple(fraction_left(a.state), -a.state.retry_after.count(),
                           std::string_view(a.key)) < std::make_tuple(fraction_left(b.state),
                                                                      -b.state.retry_after.count(),
                                                                      std::string_view(b.key));
  });
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
  std::vector<KeyState> nearest = co_await peek_all(limiter, sample.keys, stop);
  sort_nearest_first(nearest);
  if (nearest.size() > request.count) nearest.resize(request.count);
  if (global.json) {
    print_top_json(request, sample, nearest);
  } else {
    print_out(top_text(request, sample, nearest));
  }
  co_return exit_ok;
}

}  // namespace redlimit_cli
