#include "redlimit/limit.hpp"

#include <algorithm>
#include <charconv>
#include <iterator>

#include "redlimit/errors.hpp"

namespace redlimit {
namespace {

[[noreturn]] void bad_rate(std::string_view text, const std::string& why) {
  throw InvalidArgument("Rate::parse(\"" + std::string(text) + "\"): " + why +
                        "; expected <permits>/<period> such as \"400/s\", \"100/min\", "
                        "\"5/250ms\" or \"7/3s\"");
}

/// Digits only: no sign, no spaces, no hex, no exponent.
std::int64_t parse_digits(std::string_view text, std::string_view whole, const char* what) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || text.front() < '0' || text.front() > '9' || ec != std::errc{} ||
      end != text.data() + text.size()) {
    bad_rate(whole, std::string(what) + " must be a decimal integer");
  }
  return value;
}

struct Unit {
  std::string_view name;
  std::int64_t microseconds;
};

/// Shortest first; of two names for one length, the one to_string() writes comes last.
constexpr Unit units[] = {
    {"us", 1},           {"ms", 1'000},        {"s", 1'000'000},        {"m", 60'000'000},
    {"min", 60'000'000}, {"h", 3'600'000'000}, {"day", 86'400'000'000}, {"d", 86'400'000'000},
};

}  // namespace

std::string_view to_string(Algorithm algorithm) noexcept {
  switch (algorithm) {
    case Algorithm::gcra:
      return "gcra";
    case Algorithm::token_bucket:
      return "token_bucket";
    case Algorithm::leaky_bucket:
      return "leaky_bucket";
    case Algorithm::fixed_window:
      return "fixed_window";
    case Algorithm::sliding_window_log:
      return "sliding_window_log";
    case Algorithm::sliding_window_counter:
      return "sliding_window_counter";
  }
  return "unknown";
}

std::string_view to_string(Source source) noexcept {
  switch (source) {
    case Source::redis:
      return "redis";
    case Source::local:
      return "local";
    case Source::deny_cache:
      return "deny_cache";
    case Source::fallback:
      return "fallback";
    case Source::fail_open:
      return "fail_open";
    case Source::fail_closed:
      return "fail_closed";
  }
  return "unknown";
}

std::string to_string(const Rate& rate) {
  const std::int64_t us = rate.period.count();
  // The longest unit that divides the period ("us" divides every one).
  const Unit* unit = std::end(units) - 1;
  while (us % unit->microseconds != 0)
    --unit;
  return std::to_string(rate.permits) + "/" + std::to_string(us / unit->microseconds) +
         std::string(unit->name);
}

Rate Rate::parse(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) bad_rate(text, "missing '/'");
  const std::int64_t permits = parse_digits(text.substr(0, slash), text, "permits");
  if (permits <= 0) bad_rate(text, "permits must be at least 1");
  const std::string_view period = text.substr(slash + 1);
  const std::size_t unit_at = std::min(period.find_first_not_of("0123456789"), period.size());
  const std::int64_t count =
      unit_at == 0 ? 1 : parse_digits(period.substr(0, unit_at), text, "the period count");
  if (count <= 0) bad_rate(text, "the period must be longer than 0");
  const std::string_view unit = period.substr(unit_at);
  for (const Unit& candidate : units) {
    if (unit == candidate.name) {
      if (count > INT64_MAX / candidate.microseconds) bad_rate(text, "the period is too long");
      return Rate{permits, std::chrono::microseconds(count * candidate.microseconds)};
    }
  }
  bad_rate(text, "unknown unit '" + std::string(unit) + "' (use us, ms, s, m, min, h, d or day)");
}

}  // namespace redlimit
