#include "watch_command.hpp"

#include <unistd.h>

#include <cmath>
#include <optional>

#include "decision_rates.hpp"
#include "exit_status.hpp"
#include "output.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "stats_reading.hpp"
#include "table.hpp"
#include "text_format.hpp"
#include "url_redaction.hpp"

namespace redlimit_cli {
namespace {

using Clock = std::chrono::steady_clock;

/// ANSI: cursor home, clear the screen.
constexpr std::string_view clear_screen = "\x1b[H\x1b[2J";

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// `value` to the thousandth, so that JSON shows 33.333 rather than 33.333333333333336.
double rounded(double value) {
  return std::round(value * 1000.0) / 1000.0;
}

void add_row(Table& table, const LimiterActivity& row) {
  const auto rate = [&](double DecisionRates::*field) {
    return row.rates ? format_rate(*row.rates.*field) : std::string("-");
  };
  const std::string denied_percent = row.rates && row.rates->denied_percent
                                         ? format_rate(*row.rates->denied_percent) + "%"
                                         : std::string("-");
  table.add_row({printable(row.name), rate(&DecisionRates::decisions), rate(&DecisionRates::denied),
                 denied_percent, rate(&DecisionRates::shadow_denied),
                 rate(&DecisionRates::failure_policy), std::to_string(row.totals.allowed),
                 std::to_string(row.totals.denied), std::to_string(row.totals.shadow_denied),
                 std::to_string(row.totals.failure_policy)});
}

std::string activity_text(const std::string& shown_url, std::chrono::milliseconds interval,
                          const std::vector<LimiterActivity>& rows) {
  Table table({{"NAME"},
               {"DECISIONS/S", true},
               {"DENIED/S", true},
               {"DENIED %", true},
               {"SHADOW DENIED/S", true},
               {"FAILURE POLICY/S", true},
               {"ALLOWED", true},
               {"DENIED", true},
               {"SHADOW DENIED", true},
               {"FAILURE POLICY", true}});
  for (const LimiterActivity& row : rows)
    add_row(table, row);
  const LimiterActivity total = total_of(rows);
  add_row(table, total);
  // Why a hint: clients send no counts unless told to, so an empty table is the default.
  const bool none = total.totals == DecisionCounts{};
  return "redlimit watch  " + shown_url + "  every " + format_duration(interval) + "  " +
         format_utc(now_us()) + "\n(per second since the last refresh; totals since the " +
         "counts began)\n\n" + table.render() +
         (none ? "\n(no counts yet: a client sends its limiters' counts only when its "
                 "ClientOptions::stats_interval is set)\n"
               : "");
}

void write_activity(JsonWriter& json, const LimiterActivity& row) {
  const auto rate = [&](const char* key, double DecisionRates::*field) {
    json.key(key);
    if (row.rates) {
      json.real(rounded(*row.rates.*field));
    } else {
      json.null();
    }
  };
  json.begin_object();
  json.key("name").string(row.name);
  rate("decisions_per_s", &DecisionRates::decisions);
  rate("denied_per_s", &DecisionRates::denied);
  json.key("denied_percent");
  if (row.rates && row.rates->denied_percent) {
    json.real(rounded(*row.rates->denied_percent));
  } else {
    json.null();
  }
  rate("shadow_denied_per_s", &DecisionRates::shadow_denied);
  rate("failure_policy_per_s", &DecisionRates::failure_policy);
  json.key("totals").begin_object();
  json.key("allowed").integer(row.totals.allowed);
  json.key("denied").integer(row.totals.denied);
  json.key("shadow_denied").integer(row.totals.shadow_denied);
  json.key("failure_policy").integer(row.totals.failure_policy);
  json.end_object();
  json.end_object();
}

void print_activity_json(double seconds, const std::vector<LimiterActivity>& rows) {
  JsonWriter json;
  json.begin_object();
  json.key("time").string(format_utc(now_us()));
  json.key("interval_s").real(rounded(seconds));
  json.key("limiters").begin_array();
  for (const LimiterActivity& row : rows)
    write_activity(json, row);
  json.end_array();
  json.key("total");
  write_activity(json, total_of(rows));
  json.end_object();
  print_json(json);
}

}  // namespace

redlimit::Task<int> watch_rates(redlimit::Client& client, GlobalOptions global,
                                WatchRequest request, std::stop_token stop) {
  // Why only on a terminal: a pipe or a log gets each refresh after the one before.
  const bool in_place = !global.json && isatty(STDOUT_FILENO) == 1;
  const Redactor redact(global.url, global.sentinel_password);
  const std::string shown_url = redact.shown_url();
  CountsByName before = co_await read_counts(client, global.prefix, request.names);
  Clock::time_point read_at = Clock::now();
  while (!stop.stop_requested()) {
    try {
      co_await redlimit::sleep_for(client.loop(), request.interval, stop);
    } catch (const redlimit::Cancelled&) {
      break;
    }
    std::optional<CountsByName> read;
    try {
      read = co_await read_counts(client, global.prefix, request.names);
    } catch (const redlimit::Unavailable& e) {
      // Why go on: a dashboard outlives a Redis restart; the next reading spans the gap.
      if (request.once) throw;
      print_error(redact(std::string("Redis did not answer (") + e.what() +
                         "); trying again at the next refresh"));
    }
    if (!read) continue;
    CountsByName after = std::move(*read);
    const Clock::time_point now = Clock::now();
    const double seconds = std::chrono::duration<double>(now - read_at).count();
    const std::vector<LimiterActivity> rows = activity_between(before, after, seconds);
    if (global.json) {
      print_activity_json(seconds, rows);
    } else {
      const std::string text = activity_text(shown_url, request.interval, rows);
      print_out(in_place ? std::string(clear_screen) + text : text + "\n");
    }
    before = std::move(after);
    read_at = now;
    if (request.once) break;
  }
  co_return exit_ok;
}

}  // namespace redlimit_cli
