#pragma once
/// @file redis_keys.hpp
/// Reading the Redis keys limiters write: finding a limiter's keys with SCAN and telling which
/// application key each holds the state of (docs/operations.md, "Keys and TTLs").

#include <string>
#include <string_view>

namespace redlimit {

/// True for a key prefix limiters accept (LimiterOptions::prefix): 1 to 64 characters from
/// [A-Za-z0-9_.-].
bool is_valid_prefix(std::string_view prefix);

/// True for a limiter name limiters accept (LimiterOptions::name): 1 to 128 bytes.
bool is_valid_name(std::string_view name);

/// True for a key a limiter's calls accept: 1 to 65,536 bytes.
bool is_valid_key(std::string_view key);

/// The SCAN MATCH pattern of the Redis keys that hold the state of limiter `name`'s keys
/// (`<prefix>:{<escaped name>:*`, glob characters escaped; a per_client scope's keys are not
/// matched). It may match a few other keys of that limiter: parse_state_key() tells them apart.
std::string state_keys_pattern(std::string_view prefix, std::string_view name);

/// What a Redis key that state_keys_pattern() matched holds.
struct StateKey {
  enum class Kind {
    other,   ///< not a limit's state (`...}:<algorithm>:<index>`) of this limiter
    digest,  ///< the state of a long key, named by its digest: the key itself cannot be known
    key,     ///< the state of one limit of `key`
  };
  Kind kind = Kind::other;
  /// Kind::key: the application's key, as passed to the limiter; Kind::digest: the digest, as
  /// in the Redis key.
  std::string key;
};

/// Reads `redis_key` as `<prefix>:{<escaped name>:<key part>}:<algorithm>:<index>`.
StateKey parse_state_key(std::string_view redis_key, std::string_view prefix,
                         std::string_view name);

}  // namespace redlimit
