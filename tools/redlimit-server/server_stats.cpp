#include "server_stats.hpp"

namespace redlimit_server {

void ServerStats::count(std::string_view domain, bool configured, CallEnd end) {
  const std::string_view label = configured ? domain : std::string_view("unknown");
  Counts* counts = nullptr;
  {
    std::lock_guard lock(mutex_);
    auto it = domains_.find(label);
    if (it == domains_.end()) it = domains_.try_emplace(std::string(label)).first;
    counts = &it->second;
  }
  (*counts)[static_cast<std::size_t>(end)].fetch_add(1, std::memory_order_relaxed);
}

std::string ServerStats::prometheus_text() const {
  static constexpr std::array<std::string_view, 3> results = {"ok", "over_limit", "error"};
  std::string out =
      "# HELP redlimit_server_calls_total ShouldRateLimit calls answered, by domain (\"unknown\" "
      "for one the configuration does not name) and result.\n"
      "# TYPE redlimit_server_calls_total counter\n";
  std::lock_guard lock(mutex_);
  for (const auto& [domain, counts] : domains_) {
    std::string escaped;
    for (const char c : domain) {
      if (c == '\\' || c == '"') escaped += '\\';
      escaped += c == '\n' ? std::string("\\n") : std::string(1, c);
    }
    for (std::size_t i = 0; i < results.size(); ++i) {
      out += "redlimit_server_calls_total{domain=\"" + escaped + "\",result=\"" +
             std::string(results[i]) + "\"} " +
             std::to_string(counts[i].load(std::memory_order_relaxed)) + "\n";
    }
  }
  return out;
}

}  // namespace redlimit_server
