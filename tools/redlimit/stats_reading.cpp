#include "stats_reading.hpp"

#include <charconv>

#include "key_names.hpp"
#include "redlimit/errors.hpp"

namespace redlimit_cli {
namespace {

std::int64_t count_of(const std::string& field, const std::string& text) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) {
    throw redlimit::ProtocolError("the stats field '" + field + "' is not an integer");
  }
  return value;
}

redlimit::Task<std::vector<std::string>> scan_names(redlimit::Client& client, std::string prefix) {
  const std::string pattern = stats_keys_pattern(prefix);
  std::vector<std::string> names;
  std::string cursor = "0";
  do {
    const redlimit::Reply reply =
        co_await client.command("SCAN", cursor, "MATCH", pattern, "COUNT", "1000");
    const auto& parts = reply.as_array();
    cursor = parts.at(0).as_string();
    for (const redlimit::Reply& found : parts.at(1).as_array()) {
      if (auto name = stats_name_of(found.as_string(), prefix)) names.push_back(std::move(*name));
    }
  } while (cursor != "0");
  co_return names;
}

}  // namespace

DecisionCounts counts_of(const redlimit::Reply& hash) {
  DecisionCounts counts;
  const auto& items = hash.as_array();
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    const std::string& field = items[i].as_string();
    const std::string& value = items[i + 1].as_string();
    if (field == "allowed") counts.allowed = count_of(field, value);
    if (field == "denied") counts.denied = count_of(field, value);
    if (field == "shadow_denied") counts.shadow_denied = count_of(field, value);
    if (field == "failure_policy") counts.failure_policy = count_of(field, value);
  }
  return counts;
}

redlimit::Task<CountsByName> read_counts(redlimit::Client& client, std::string prefix,
                                         std::vector<std::string> names) {
  const bool named = !names.empty();
  if (!named) names = co_await scan_names(client, prefix);
  CountsByName counts;
  for (const std::string& name : names) {
    const redlimit::Reply hash = co_await client.command("HGETALL", stats_key(prefix, name));
    // Why skip an empty hash only when scanning: it expired since the SCAN saw it.
    if (named || !hash.as_array().empty()) counts[name] = counts_of(hash);
  }
  co_return counts;
}

}  // namespace redlimit_cli
