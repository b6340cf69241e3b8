#include "server_stats.hpp"

#include <algorithm>
#include <cstdlib>

redlimit::Task<void> reset_server_stats(redlimit::Client& client) {
  co_await client.command("CONFIG", "RESETSTAT");
}

namespace {

/// The number of field `name` in the commandstats line that starts at `line`
/// ("cmdstat_evalsha:calls=3,usec=20,usec_per_call=6.67,..."); nullopt if the line has none.
std::optional<double> field_of(const std::string& text, std::size_t line, const std::string& name) {
  const std::size_t end = std::min(text.find('\n', line), text.size());
  for (const char separator : {':', ','}) {
    const std::size_t at = text.find(separator + name + '=', line);
    if (at < end) return std::strtod(text.c_str() + at + name.size() + 2, nullptr);
  }
  return std::nullopt;
}

}  // namespace

redlimit::Task<std::optional<EvalshaStats>> evalsha_stats(redlimit::Client& client) {
  const redlimit::Reply info = co_await client.command("INFO", "commandstats");
  const std::string& text = info.as_string();
  const std::size_t line = text.find("cmdstat_evalsha:");
  if (line == std::string::npos) co_return std::nullopt;
  const auto calls = field_of(text, line, "calls");
  const auto usec = field_of(text, line, "usec");
  const auto per_call = field_of(text, line, "usec_per_call");
  if (!calls || !usec || !per_call) co_return std::nullopt;
  co_return EvalshaStats{static_cast<std::int64_t>(*calls), static_cast<std::int64_t>(*usec),
                         *per_call};
}

redlimit::Task<std::optional<double>> mean_key_bytes(redlimit::Client& client,
                                                     std::vector<std::string> keys) {
  double total = 0;
  int counted = 0;
  for (const std::string& key : keys) {
    const redlimit::Reply bytes = co_await client.command("MEMORY", "USAGE", key, "SAMPLES", "0");
    if (bytes.is_nil()) continue;
    total += static_cast<double>(bytes.as_integer());
    ++counted;
  }
  if (counted == 0) co_return std::nullopt;
  co_return total / counted;
}
