#include "redlimit/redis_keys.hpp"

#include <array>
#include <optional>

#include "policy/key_format.hpp"
#include "redlimit/limit.hpp"

namespace redlimit {
namespace {

/// `text` without `prefix`, or nullopt if it does not start with it.
std::optional<std::string_view> after(std::string_view text, std::string_view prefix) {
  if (!text.starts_with(prefix)) return std::nullopt;
  return text.substr(prefix.size());
}

/// True for ":<algorithm>:<index>", the end of a limit's state key.
bool is_limit_suffix(std::string_view suffix) {
  constexpr std::array algorithms{
      Algorithm::gcra,         Algorithm::token_bucket,       Algorithm::leaky_bucket,
      Algorithm::fixed_window, Algorithm::sliding_window_log, Algorithm::sliding_window_counter};
  for (const Algorithm algorithm : algorithms) {
    const std::string start = ":" + std::string(to_string(algorithm)) + ":";
    if (const auto index = after(suffix, start)) {
      return !index->empty() && index->find_first_not_of("0123456789") == std::string_view::npos;
    }
  }
  return false;
}

/// `<prefix>:{<escaped name>:`, the start of every state key of the limiter.
std::string state_key_start(std::string_view prefix, std::string_view name) {
  return std::string(prefix) + ":{" + detail::escape_key_part(name) + ":";
}

/// `text` as a literal in a SCAN MATCH pattern: the glob characters * ? [ ] and \ escaped.
std::string glob_literal(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

bool is_valid_prefix(std::string_view prefix) {
  return detail::is_valid_prefix(prefix);
}

bool is_valid_name(std::string_view name) {
  return !name.empty() && name.size() <= detail::max_name_bytes;
}

bool is_valid_key(std::string_view key) {
  return !key.empty() && key.size() <= detail::max_key_bytes;
}

std::string state_keys_pattern(std::string_view prefix, std::string_view name) {
  return glob_literal(state_key_start(prefix, name)) + "*";
}

StateKey parse_state_key(std::string_view redis_key, std::string_view prefix,
                         std::string_view name) {
  const auto rest = after(redis_key, state_key_start(prefix, name));
  if (!rest) return {};
  // Why the first '}': an escaped key part never contains one.
  const auto close = rest->find('}');
  if (close == std::string_view::npos || !is_limit_suffix(rest->substr(close + 1))) return {};
  const std::string_view part = rest->substr(0, close);
  if (part.starts_with("%#")) return {StateKey::Kind::digest, std::string(part)};
  auto key = detail::unescape_key_part(part);
  if (!key) return {};
  return {StateKey::Kind::key, std::move(*key)};
}

}  // namespace redlimit
