#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace redlimit::detail {

/// Keys whose escaped form is longer than this are replaced by a digest.
inline constexpr std::size_t max_escaped_key = 128;
/// The largest key a limiter accepts, in bytes.
inline constexpr std::size_t max_key_bytes = 65536;

/// True for a key prefix of 1 to 64 characters from [A-Za-z0-9_.-].
bool is_valid_prefix(std::string_view prefix);

/// Escapes one part of a key so that the encoding is injective and cannot break the hash tag:
/// '{', '}', ':', '%' and bytes outside the printable ASCII range become %XX (upper-case hex).
std::string escape_key_part(std::string_view raw);

/// The escaped key, or "%#" and 32 hex digits of SHA-256 of the raw key when the escaped form
/// is longer than max_escaped_key ("%#" never appears in an escaped part, so the two forms
/// cannot collide).
std::string key_part(std::string_view raw);

/// `<prefix>:{<name>:<key>}`: the common start of every Redis key of one decision. The braces
/// make `<name>:<key>` the hash tag, so all keys of a decision share one cluster slot.
std::string key_base(std::string_view prefix, std::string_view escaped_name,
                     std::string_view raw_key);

}  // namespace redlimit::detail
