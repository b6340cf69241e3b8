#pragma once
// The Redis keys the command looks for: a limiter's state keys and the fleet's stats hashes
// (the formats are in docs/operations.md and src/limiter/key_format.hpp).

#include <optional>
#include <string>
#include <string_view>

namespace redlimit_cli {

/// `text` as a literal in a SCAN MATCH pattern: the glob metacharacters * ? [ ] and \ are
/// escaped with a backslash.
std::string glob_literal(std::string_view text);

/// The MATCH pattern of the state keys of limiter `name` (its overall scope):
/// `<prefix>:{<escaped name>:*`.
std::string limiter_keys_pattern(std::string_view prefix, std::string_view name);

/// What a key that limiter_keys_pattern() matched is.
struct LimiterKey {
  enum class Kind {
    other,   ///< not a limit's state key (`...}:<algorithm>:<index>`) of this limiter
    digest,  ///< a long key, stored as its digest: its raw form cannot be known
    key,     ///< a limit's state key of `key`
  };
  Kind kind = Kind::other;
  /// Kind::key: the raw key, as the application passes it; Kind::digest: the digest as stored.
  std::string key;
};

/// Reads `redis_key` as `<prefix>:{<escaped name>:<key part>}:<algorithm>:<index>`.
LimiterKey parse_limiter_key(std::string_view redis_key, std::string_view prefix,
                             std::string_view name);

/// The hash where clients add up the decisions of limiter `name`: `<prefix>:stats:{<escaped
/// name>}`.
std::string stats_key(std::string_view prefix, std::string_view name);

/// The MATCH pattern of every stats hash: `<prefix>:stats:{*}`.
std::string stats_keys_pattern(std::string_view prefix);

/// The limiter name of a stats hash key; nullopt if `redis_key` is not one.
std::optional<std::string> stats_name_of(std::string_view redis_key, std::string_view prefix);

}  // namespace redlimit_cli
