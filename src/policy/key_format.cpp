#include "policy/key_format.hpp"

#include <openssl/sha.h>

#include <algorithm>
#include <array>

namespace redlimit::detail {
namespace {

constexpr char hex_digits[] = "0123456789ABCDEF";

// Why a table: keys are escaped on every decision, and most keep every byte.
constexpr auto kept_bytes = [] {
  std::array<bool, 256> kept{};
  for (char c = 0x21; c < 0x7f; ++c)
    kept[static_cast<unsigned char>(c)] = c != '{' && c != '}' && c != ':' && c != '%';
  return kept;
}();

std::size_t escaped_size(std::string_view raw) {
  std::size_t size = raw.size();
  for (const char c : raw)
    size += kept_bytes[static_cast<unsigned char>(c)] ? 0 : 2;
  return size;
}

/// Writes `raw` escaped (`size` bytes, from escaped_size) at `out`; returns the end.
char* write_escaped(char* out, std::string_view raw, std::size_t size) {
  if (size == raw.size()) return std::copy(raw.begin(), raw.end(), out);
  for (const char c : raw) {
    const auto byte = static_cast<unsigned char>(c);
    if (kept_bytes[byte]) {
      *out++ = c;
    } else {
      *out++ = '%';
      *out++ = hex_digits[byte >> 4];
      *out++ = hex_digits[byte & 0xF];
    }
  }
  return out;
}

/// The size of key_part(raw), given its escaped size: "%#" and 32 hex digits past the bound.
std::size_t key_part_size(std::size_t escaped) {
  return escaped <= max_escaped_key ? escaped : 34;
}

/// Writes key_part(raw) at `out` (`escaped` is escaped_size(raw)); returns the end.
char* write_key_part(char* out, std::string_view raw, std::size_t escaped) {
  if (escaped <= max_escaped_key) return write_escaped(out, raw, escaped);
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest;
  SHA256(reinterpret_cast<const unsigned char*>(raw.data()), raw.size(), digest.data());
  *out++ = '%';
  *out++ = '#';
  for (std::size_t i = 0; i < 16; ++i) {
    *out++ = hex_digits[digest[i] >> 4];
    *out++ = hex_digits[digest[i] & 0xF];
  }
  return out;
}

}  // namespace

bool is_valid_prefix(std::string_view prefix) {
  return !prefix.empty() && prefix.size() <= 64 &&
         prefix.find_first_not_of(
             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
             "0123456789_.-") == std::string_view::npos;
}

std::string escape_key_part(std::string_view raw) {
  const std::size_t size = escaped_size(raw);
  std::string out(size, '\0');
  write_escaped(out.data(), raw, size);
  return out;
}

std::optional<std::string> unescape_key_part(std::string_view escaped) {
  std::string raw;
  raw.reserve(escaped.size());
  for (std::size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] != '%') {
      raw += escaped[i];
      continue;
    }
    if (i + 2 >= escaped.size()) return std::nullopt;
    const char* high = std::find(hex_digits, hex_digits + 16, escaped[i + 1]);
    const char* low = std::find(hex_digits, hex_digits + 16, escaped[i + 2]);
    if (high == hex_digits + 16 || low == hex_digits + 16) return std::nullopt;
    raw += static_cast<char>((high - hex_digits) * 16 + (low - hex_digits));
    i += 2;
  }
  // Why compare: only what escape_key_part() writes names a key; "%41" decodes to "A" too, but
  // no key was ever written that way.
  if (escape_key_part(raw) != escaped) return std::nullopt;
  return raw;
}

std::string key_part(std::string_view raw) {
  const std::size_t escaped = escaped_size(raw);
  std::string out(key_part_size(escaped), '\0');
  write_key_part(out.data(), raw, escaped);
  return out;
}

KeyBase key_base(std::string_view prefix, std::string_view escaped_name, std::string_view raw_key) {
  const std::size_t escaped = escaped_size(raw_key);
  KeyBase base;
  char* out = base.prepare(prefix.size() + escaped_name.size() + key_part_size(escaped) + 4);
  out = std::copy(prefix.begin(), prefix.end(), out);
  *out++ = ':';
  *out++ = '{';
  out = std::copy(escaped_name.begin(), escaped_name.end(), out);
  *out++ = ':';
  out = write_key_part(out, raw_key, escaped);
  *out = '}';
  return base;
}

KeyBase& KeyBase::operator=(KeyBase&& other) noexcept {
  if (this != &other) {
    size_ = other.size_;
    heap_ = std::move(other.heap_);
    if (!heap_) std::copy_n(other.inline_.begin(), size_, inline_.begin());
    other.size_ = 0;
  }
  return *this;
}

char* KeyBase::prepare(std::size_t size) {
  if (size <= inline_.size()) {
    heap_.reset();
    size_ = size;
    return inline_.data();
  }
  // Why allocated before anything changes: if it throws, the object keeps its old text whole.
  heap_ = std::make_unique_for_overwrite<char[]>(size);
  size_ = size;
  return heap_.get();
}

std::string stats_key(std::string_view prefix, std::string_view escaped_name) {
  return std::string(prefix) + ":stats:{" + std::string(escaped_name) + "}";
}

std::string stats_names_key(std::string_view prefix) {
  return std::string(prefix) + ":stats:names";
}

}  // namespace redlimit::detail
