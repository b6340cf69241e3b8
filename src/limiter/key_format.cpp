#include "limiter/key_format.hpp"

#include <array>

#include "limiter/sha256.hpp"

namespace redlimit::detail {
namespace {

constexpr char hex_digits[] = "0123456789ABCDEF";

constexpr bool kept_as_is(unsigned char c) {
  return c > 0x20 && c < 0x7f && c != '{' && c != '}' && c != ':' && c != '%';
}

// Why a table: keys are escaped on every decision, and most keep every byte.
constexpr auto kept_bytes = [] {
  std::array<bool, 256> kept{};
  for (std::size_t c = 0; c < kept.size(); ++c)
    kept[c] = kept_as_is(static_cast<unsigned char>(c));
  return kept;
}();

std::size_t escaped_size(std::string_view raw) {
  std::size_t size = raw.size();
  for (const char c : raw)
    size += kept_bytes[static_cast<unsigned char>(c)] ? 0 : 2;
  return size;
}

void append_escaped(std::string& out, std::string_view raw, std::size_t size) {
  if (size == raw.size()) {
    out.append(raw);
    return;
  }
  const std::size_t start = out.size();
  out.resize(start + size);
  char* at = out.data() + start;
  for (const char c : raw) {
    const auto byte = static_cast<unsigned char>(c);
    if (kept_bytes[byte]) {
      *at++ = c;
    } else {
      *at++ = '%';
      *at++ = hex_digits[byte >> 4];
      *at++ = hex_digits[byte & 0xF];
    }
  }
}

constexpr std::size_t digest_part_size = 34;  ///< "%#" and 32 hex digits

void append_key_part(std::string& out, std::string_view raw, std::size_t size) {
  if (size <= max_escaped_key) return append_escaped(out, raw, size);
  const auto digest = sha256(raw);
  out += "%#";
  for (std::size_t i = 0; i < 16; ++i) {
    out += hex_digits[digest[i] >> 4];
    out += hex_digits[digest[i] & 0xF];
  }
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
  append_escaped(out, raw, escaped_size(raw));
  return out;
}

std::string key_part(std::string_view raw) {
  std::string out;
  append_key_part(out, raw, escaped_size(raw));
  return out;
}

std::string key_base(std::string_view prefix, std::string_view escaped_name,
                     std::string_view raw_key) {
  const std::size_t part_size = escaped_size(raw_key);
  std::string base;
  base.reserve(prefix.size() + escaped_name.size() +
               (part_size <= max_escaped_key ? part_size : digest_part_size) + 4);
  base.append(prefix).append(":{").append(escaped_name).append(":");
  append_key_part(base, raw_key, part_size);
  base += '}';
  return base;
}

}  // namespace redlimit::detail
