#include "key_names.hpp"

#include <array>

#include "limiter/key_format.hpp"
#include "redlimit/limit.hpp"

namespace redlimit_cli {
namespace {

/// `text` without `prefix`, or nullopt if it does not start with it.
std::optional<std::string_view> after(std::string_view text, std::string_view prefix) {
  if (!text.starts_with(prefix)) return std::nullopt;
  return text.substr(prefix.size());
}

/// True for ":<algorithm>:<index>", the end of a limit's state key.
bool is_limit_suffix(std::string_view suffix) {
  using redlimit::Algorithm;
  constexpr std::array algorithms{
      Algorithm::gcra,         Algorithm::token_bucket,       Algorithm::leaky_bucket,
      Algorithm::fixed_window, Algorithm::sliding_window_log, Algorithm::sliding_window_counter};
  for (const Algorithm algorithm : algorithms) {
    const std::string start = ":" + std::string(redlimit::to_string(algorithm)) + ":";
    if (const auto index = after(suffix, start)) {
      return !index->empty() && index->find_first_not_of("0123456789") == std::string_view::npos;
    }
  }
  return false;
}

std::string limiter_key_start(std::string_view prefix, std::string_view name) {
  return std::string(prefix) + ":{" + redlimit::detail::escape_key_part(name) + ":";
}

}  // namespace

std::string glob_literal(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string limiter_keys_pattern(std::string_view prefix, std::string_view name) {
  return glob_literal(limiter_key_start(prefix, name)) + "*";
}

LimiterKey parse_limiter_key(std::string_view redis_key, std::string_view prefix,
                             std::string_view name) {
  const auto rest = after(redis_key, limiter_key_start(prefix, name));
  if (!rest) return {};
  // Why the first '}': an escaped key part never contains one.
  const auto close = rest->find('}');
  if (close == std::string_view::npos || !is_limit_suffix(rest->substr(close + 1))) return {};
  const std::string_view part = rest->substr(0, close);
  if (part.starts_with("%#")) return {LimiterKey::Kind::digest, std::string(part)};
  auto key = redlimit::detail::unescape_key_part(part);
  if (!key) return {};
  return {LimiterKey::Kind::key, std::move(*key)};
}

std::string stats_key(std::string_view prefix, std::string_view name) {
  return redlimit::detail::stats_key(prefix, redlimit::detail::escape_key_part(name));
}

std::string stats_keys_pattern(std::string_view prefix) {
  return glob_literal(prefix) + ":stats:{*}";
}

std::optional<std::string> stats_name_of(std::string_view redis_key, std::string_view prefix) {
  const auto rest = after(redis_key, std::string(prefix) + ":stats:{");
  if (!rest || !rest->ends_with('}')) return std::nullopt;
  return redlimit::detail::unescape_key_part(rest->substr(0, rest->size() - 1));
}

}  // namespace redlimit_cli
