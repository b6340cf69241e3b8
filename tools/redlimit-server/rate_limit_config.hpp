#pragma once
/// @file rate_limit_config.hpp
/// The limits redlimit-server enforces: envoyproxy/ratelimit's YAML configuration, one domain
/// per file, accepted as it is, with redlimit's extensions (another algorithm and burst per
/// limit or per domain, all-or-nothing descriptors, a failure policy per domain).

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/failure_policy.hpp"
#include "redlimit/limit.hpp"

namespace redlimit_server {

/// A configuration that cannot be used: the message names the file, the line and the field.
class ConfigFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The time units of envoyproxy/ratelimit (and Envoy's RateLimitResponse.RateLimit.Unit, whose
/// numbers they keep).
enum class TimeUnit { second = 1, minute = 2, hour = 3, day = 4, month = 5, year = 6 };

/// The unit's length, as envoyproxy/ratelimit counts it: a month is 30 days, a year 365.
std::chrono::seconds unit_length(TimeUnit unit);
/// "second", "minute", ...
std::string_view to_string(TimeUnit unit);

/// Where a part of the configuration was written, for messages: `file:line`.
struct Location {
  std::string file;
  int line = 0;  ///< 1-based
};
std::string to_string(const Location& where);

/// One `rate_limit` of a descriptor.
struct LimitConfig {
  std::uint32_t requests_per_unit = 0;
  TimeUnit unit = TimeUnit::second;
  bool unlimited = false;
  std::string name;                   ///< empty: unnamed
  std::vector<std::string> replaces;  ///< the names of the limits this one replaces
  /// redlimit's extension: the algorithm (else the domain's, else envoyproxy/ratelimit's fixed
  /// window aligned to the unit) and its burst (0: requests_per_unit).
  redlimit::Algorithm algorithm = redlimit::Algorithm::fixed_window;
  std::int64_t burst = 0;
  bool shadow_mode = false;  ///< the descriptor's: decided and counted, never enforced
  /// The descriptor's; accepted, without effect: the library counts per limit, never per value.
  bool detailed_metric = false;
  /// The descriptor's place in the tree, as envoyproxy/ratelimit names it in its stats:
  /// `<domain>.<key>[_<value>].<key>[_<value>]...`, each part as name_part() writes it; the
  /// limit's name (its limiter's, its policy's in the store). Over 128 bytes, its first 111, '~'
  /// and 16 hex digits of a hash of all of it.
  std::string full_key;
  Location where;

  /// The redlimit limit that enforces it (not for an unlimited one, nor one of 0 requests,
  /// which denies every request); its values are checked when a Limiter takes it.
  redlimit::Limit limit() const;
};

/// One level of a domain's descriptor tree.
struct DescriptorNode {
  std::optional<LimitConfig> limit;
  /// The next level, by `<key>` or `<key>_<value>`.
  std::map<std::string, DescriptorNode, std::less<>> children;
  /// The children whose `<key>_<value>` ends in '*' (a value prefix), in the file's order.
  std::vector<std::string> wildcard_keys;
  Location where;  ///< where the descriptor begins (a domain's root: where the file begins)
};

/// What a domain does when Redis cannot answer (redlimit's extension `on_failure`).
struct FailureConfig {
  /// The failure policy that answers; none (the default): the call fails (gRPC UNAVAILABLE,
  /// HTTP 503), as envoyproxy/ratelimit fails it on a Redis error, so that the caller's own
  /// failure mode decides (Envoy's failure_mode_deny).
  std::optional<redlimit::FailurePolicy::Kind> kind;
  double local_share = 0;  ///< local_fallback: this server's share of each limit

  friend bool operator==(const FailureConfig&, const FailureConfig&) = default;
};

/// One domain: its descriptors and redlimit's extensions.
struct DomainConfig {
  std::string name;
  DescriptorNode root;
  /// All-or-nothing (redlimit's extension): a request over one descriptor's limit consumes
  /// nothing of the others'. By default, as envoyproxy/ratelimit, it still counts against
  /// them.
  bool all_or_nothing = false;
  FailureConfig on_failure;
  Location where;
  /// The fields out of their place that were ignored (as envoyproxy/ratelimit ignores them), each
  /// with its file and line: for a warning.
  std::vector<std::string> ignored;
};

/// Every domain the server knows.
struct RateLimitConfig {
  std::map<std::string, DomainConfig, std::less<>> domains;
};

/// One part of a limit's full key (the domain, or one level's `<key>[_<value>]`): the part,
/// with '.' written "%2E" and '%' "%25" (so that a key holding a dot names no nested limit).
std::string name_part(std::string_view part);
/// The name a limit of `full_key` goes by (its limiter's, its policy's in the store: 1 to 128
/// bytes): the key itself, or its first 111 bytes, '~' and the 16 hex digits of its 64-bit
/// FNV-1a hash, the same on every replica.
std::string limit_name(const std::string& full_key);

/// One domain's YAML text, read from `file` (for messages). Throws ConfigFileError.
DomainConfig parse_domain(std::string_view text, const std::string& file);
/// The files of the configuration in `path`: the file itself, or every file below the directory
/// (subdirectories too, whatever the names, as envoyproxy/ratelimit's loader reads them) but
/// where a part of its path below it starts with '.' (a Kubernetes ConfigMap's `..data` holds
/// what its links point to; editors' swap files), in path order. Throws ConfigFileError when
/// the directory cannot be listed.
std::vector<std::filesystem::path> config_files(const std::filesystem::path& path);
/// The configuration in `path` (config_files(): one domain each). With `merge_domains` (as
/// envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG), the files of one domain are merged: their
/// descriptors join it (in path order), and they must agree on redlimit's domain fields. Throws
/// ConfigFileError, also for a domain defined twice (without `merge_domains`), or a descriptor
/// in two files of one domain.
RateLimitConfig load_config(const std::filesystem::path& path, bool merge_domains = false);

}  // namespace redlimit_server
