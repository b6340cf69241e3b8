#include "server_stats.hpp"

#include <cstdlib>

redlimit::Task<void> reset_server_stats(redlimit::Client& client) {
  co_await client.command("CONFIG", "RESETSTAT");
}

redlimit::Task<std::optional<double>> evalsha_usec_per_call(redlimit::Client& client) {
  const redlimit::Reply info = co_await client.command("INFO", "commandstats");
  const std::string& text = info.as_string();
  const std::string marker = "cmdstat_evalsha:";
  const std::size_t line = text.find(marker);
  if (line == std::string::npos) co_return std::nullopt;
  const std::size_t field = text.find("usec_per_call=", line);
  if (field == std::string::npos) co_return std::nullopt;
  co_return std::strtod(text.c_str() + field + 14, nullptr);
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
