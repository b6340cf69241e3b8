#pragma once
/// @file server_stats.hpp
/// ServerStats: redlimit-server's own counts per domain, beside the library's per limit.

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace redlimit_server {

/// How a call ended, for its count.
enum class CallEnd { ok, over_limit, error };

/// Counts the calls per domain and how they ended. Thread-safe: the workers count, /metrics
/// reads. A domain the configuration does not name counts as "unknown", so the labels are
/// bounded by the configuration.
class ServerStats {
 public:
  /// One call of `domain` (named by the configuration, or not) ended as `end`.
  void count(std::string_view domain, bool configured, CallEnd end);
  /// redlimit_server_calls_total{domain,result} in Prometheus text exposition format 0.0.4.
  std::string prometheus_text() const;

 private:
  using Counts = std::array<std::atomic<std::uint64_t>, 3>;

  mutable std::mutex mutex_;
  /// Per domain. Why a counter is counted outside the lock: a map's nodes stay where they are,
  /// and none is ever removed.
  std::map<std::string, Counts, std::less<>> domains_;
};

}  // namespace redlimit_server
