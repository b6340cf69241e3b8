#pragma once
// How times, durations, rates and untrusted text are written in the tables, and how --interval
// is read.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "redlimit/limit.hpp"

namespace redlimit_cli {

/// A Redis time (microseconds since the epoch) in ISO 8601 UTC, to the millisecond:
/// "2025-03-01T12:00:05.250Z".
std::string format_utc(std::int64_t since_epoch_us);

/// A duration for people: "0", "850us", "12.5ms", "200ms", "3.25s", "1s", "4m05s", "2h30m",
/// "1d06h".
std::string format_duration(std::chrono::microseconds duration);

/// A rate per second with one decimal: "0.0", "1234.5".
std::string format_rate(double per_second);

/// `text` safe to show on a terminal: printable ASCII as it is, every other byte as \xNN, a
/// backslash as "\\". Keys and names are anyone's bytes; escape sequences must not reach the
/// terminal.
std::string printable(std::string_view text);

/// The name of a Carry as the command line takes it: "as_is", "proportional", "reset".
std::string_view carry_name(redlimit::Carry carry) noexcept;

/// Reads an --interval: a decimal number with a unit ms, s or m ("1s", "250ms", "0.5s", "2m");
/// nullopt for anything else or for less than 100 ms.
std::optional<std::chrono::milliseconds> parse_interval(std::string_view text);

}  // namespace redlimit_cli
