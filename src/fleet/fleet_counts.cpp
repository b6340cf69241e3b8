#include "redlimit/fleet_counts.hpp"

#include <algorithm>
#include <charconv>

#include "fleet/fleet_schema.hpp"
#include "policy/key_format.hpp"
#include "policy/validation.hpp"
#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"

namespace redlimit {
namespace {

std::uint64_t count_of(std::string_view field, const std::string& text) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) {
    throw ProtocolError("the fleet's count '" + std::string(field) + "' is not a count: '" + text +
                        "'");
  }
  return value;
}

/// The counts of an HGETALL reply of a name's hash (fields it does not know are ignored,
/// missing ones are 0).
FleetCounts counts_of(std::string name, const Reply& hash) {
  FleetCounts counts{.name = std::move(name)};
  std::uint64_t* const by_field[] = {&counts.allowed, &counts.denied, &counts.shadow_denied,
                                     &counts.failure_policy};
  const auto& items = hash.as_array();
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    const std::string& field = items[i].as_string();
    for (std::size_t known = 0; known < detail::fleet_count_fields.size(); ++known) {
      if (field == detail::fleet_count_fields[known]) {
        *by_field[known] = count_of(field, items[i + 1].as_string());
      }
    }
  }
  return counts;
}

}  // namespace

Task<std::vector<std::string>> fleet_limiter_names(Client& client, std::string prefix) {
  detail::check_prefix("prefix", prefix);
  const Reply reply = co_await client.command("ZRANGE", detail::stats_names_key(prefix), "0", "-1");
  std::vector<std::string> names;
  for (const Reply& name : reply.as_array())
    names.push_back(name.as_string());
  std::sort(names.begin(), names.end());
  co_return names;
}

Task<std::vector<FleetCounts>> read_fleet_counts(Client& client, std::vector<std::string> names,
                                                 std::string prefix) {
  detail::check_prefix("prefix", prefix);
  for (const std::string& name : names)
    detail::check_name("name", name);
  std::vector<FleetCounts> counts;
  counts.reserve(names.size());
  for (std::string& name : names) {
    const Reply hash = co_await client.command(
        "HGETALL", detail::stats_key(prefix, detail::escape_key_part(name)));
    counts.push_back(counts_of(std::move(name), hash));
  }
  co_return counts;
}

}  // namespace redlimit
