#include "limiter/key_format.hpp"

#include "limiter/sha256.hpp"

namespace redlimit::detail {
namespace {

constexpr char hex_digits[] = "0123456789ABCDEF";

bool kept_as_is(unsigned char c) {
  return c > 0x20 && c < 0x7f && c != '{' && c != '}' && c != ':' && c != '%';
}

}  // namespace

bool is_valid_prefix(std::string_view prefix) {
  return !prefix.empty() && prefix.size() <= 64 &&
         prefix.find_first_not_of(
             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
             "0123456789_.-") == std::string_view::npos;
}

std::string escape_key_part(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (const char c : raw) {
    const auto byte = static_cast<unsigned char>(c);
    if (kept_as_is(byte)) {
      out += c;
    } else {
      out += '%';
      out += hex_digits[byte >> 4];
      out += hex_digits[byte & 0xF];
    }
  }
  return out;
}

std::string key_part(std::string_view raw) {
  std::string escaped = escape_key_part(raw);
  if (escaped.size() <= max_escaped_key) return escaped;
  const auto digest = sha256(raw);
  std::string out = "%#";
  for (std::size_t i = 0; i < 16; ++i) {
    out += hex_digits[digest[i] >> 4];
    out += hex_digits[digest[i] & 0xF];
  }
  return out;
}

std::string key_base(std::string_view prefix, std::string_view escaped_name,
                     std::string_view raw_key) {
  std::string base;
  base.reserve(prefix.size() + escaped_name.size() + raw_key.size() + 8);
  base.append(prefix).append(":{").append(escaped_name).append(":");
  base.append(key_part(raw_key)).append("}");
  return base;
}

}  // namespace redlimit::detail
