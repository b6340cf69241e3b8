#include "metrics/label_value.hpp"

#include <cstddef>

namespace redlimit::detail {
namespace {

constexpr std::string_view replacement = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

bool continuation(unsigned char byte) noexcept {
  return (byte & 0xC0) == 0x80;
}

/// The length of the valid UTF-8 sequence of 2 to 4 bytes that starts `text`, or 0 (RFC 3629:
/// no overlong forms, no surrogates, nothing above U+10FFFF).
std::size_t multibyte_length(std::string_view text) noexcept {
  const auto byte = [&text](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  std::size_t length = 0;
  unsigned char second_min = 0x80;
  unsigned char second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_min = 0xA0;  // overlong
    if (lead == 0xED) second_max = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_min = 0x90;  // overlong
    if (lead == 0xF4) second_max = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (text.size() < length || byte(1) < second_min || byte(1) > second_max) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (!continuation(byte(i))) return 0;
  }
  return length;
}

}  // namespace

void append_label_value(std::string& out, std::string_view value) {
  for (std::size_t i = 0; i < value.size();) {
    const char c = value[i];
    if (static_cast<unsigned char>(c) < 0x80) {
      if (c == '\\') {
        out += "\\\\";
      } else if (c == '"') {
        out += "\\\"";
      } else if (c == '\n') {
        out += "\\n";
      } else {
        out += c;
      }
      ++i;
      continue;
    }
    const std::size_t length = multibyte_length(value.substr(i));
    if (length == 0) {
      out += replacement;
      ++i;
    } else {
      out.append(value.substr(i, length));
      i += length;
    }
  }
}

}  // namespace redlimit::detail
