#include "text_format.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace redlimit_cli {

using namespace std::chrono_literals;

namespace {

/// "12.50" -> "12.5", "3.00" -> "3".
std::string without_trailing_zeros(std::string text) {
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.') text.pop_back();
  return text;
}

}  // namespace

std::string format_utc(std::int64_t since_epoch_us) {
  const std::int64_t seconds = since_epoch_us / 1'000'000;
  const auto millis = static_cast<int>(since_epoch_us % 1'000'000 / 1000);
  const auto time = static_cast<std::time_t>(seconds);
  std::tm utc{};
  gmtime_r(&time, &utc);
  char text[64];
  std::snprintf(text, sizeof(text), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, millis);
  return text;
}

std::string format_duration(std::chrono::microseconds duration) {
  // Why truncate: integer arithmetic never rounds 999.99 ms up to a "1000.0ms".
  const auto whole = [](std::int64_t value) { return static_cast<long long>(value); };
  const std::int64_t us = duration.count();
  char text[48];
  if (us <= 0) return "0";
  if (us < 1000) {
    std::snprintf(text, sizeof(text), "%lldus", whole(us));
  } else if (duration < 1s) {
    std::snprintf(text, sizeof(text), "%lld.%lld", whole(us / 1000), whole(us / 100 % 10));
    return without_trailing_zeros(text) + "ms";
  } else if (duration < 1min) {
    std::snprintf(text, sizeof(text), "%lld.%02lld", whole(us / 1'000'000),
                  whole(us / 10'000 % 100));
    return without_trailing_zeros(text) + "s";
  } else if (duration < 1h) {
    const std::int64_t seconds = us / 1'000'000;
    std::snprintf(text, sizeof(text), "%lldm%02llds", whole(seconds / 60), whole(seconds % 60));
  } else if (duration < std::chrono::hours(24)) {
    const std::int64_t minutes = us / 60'000'000;
    std::snprintf(text, sizeof(text), "%lldh%02lldm", whole(minutes / 60), whole(minutes % 60));
  } else {
    const std::int64_t hours = us / 3'600'000'000;
    std::snprintf(text, sizeof(text), "%lldd%02lldh", whole(hours / 24), whole(hours % 24));
  }
  return text;
}

std::string format_rate(double per_second) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", per_second);
  return text;
}

std::string printable(std::string_view text) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte == '\\') {
      out += "\\\\";
    } else if (byte >= 0x20 && byte < 0x7F) {
      out += c;
    } else {
      out += "\\x";
      out += hex[byte >> 4];
      out += hex[byte & 0xF];
    }
  }
  return out;
}

std::string_view carry_name(redlimit::Carry carry) noexcept {
  switch (carry) {
    case redlimit::Carry::as_is:
      return "as_is";
    case redlimit::Carry::proportional:
      return "proportional";
    case redlimit::Carry::reset:
      return "reset";
  }
  return "as_is";
}

std::optional<std::chrono::milliseconds> parse_interval(std::string_view text) {
  double count = 0;
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), count, std::chars_format::fixed);
  if (ec != std::errc{} || !std::isfinite(count) || count <= 0) return std::nullopt;
  const std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
  double ms_per_unit = 0;
  if (unit == "ms") {
    ms_per_unit = 1;
  } else if (unit == "s") {
    ms_per_unit = 1000;
  } else if (unit == "m") {
    ms_per_unit = 60'000;
  } else if (unit == "h") {
    ms_per_unit = 3'600'000;
  } else {
    return std::nullopt;
  }
  const double ms = count * ms_per_unit;
  if (ms < 100 || ms > 86'400'000) return std::nullopt;
  return std::chrono::milliseconds(std::llround(ms));
}

}  // namespace redlimit_cli
