// The pieces of the redlimit command that need no server: JSON, tables, text, URL redaction,
// rates, top's order, and the command line.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "command_line.hpp"
#include "decision_rates.hpp"
#include "json_writer.hpp"
#include "redlimit/errors.hpp"
#include "table.hpp"
#include "text_format.hpp"
#include "top_command.hpp"
#include "url_redaction.hpp"

namespace redlimit_cli {
namespace {

using namespace std::chrono_literals;

/// `text` as JsonWriter writes a string.
std::string json_quoted(std::string_view text) {
  JsonWriter json;
  json.string(text);
  return json.str();
}

TEST(JsonWriter, SeparatesMembersAndElementsWithCommas) {
  JsonWriter json;
  json.begin_object();
  json.key("n").integer(-3);
  json.key("list").begin_array().integer(1).boolean(false).null().begin_object().end_object();
  json.end_array();
  json.key("empty").begin_array().end_array();
  json.key("x").real(0.5);
  json.end_object();
  EXPECT_EQ(json.str(), R"({"n":-3,"list":[1,false,null,{}],"empty":[],"x":0.5})");
}

TEST(JsonWriter, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(json_quoted("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(json_quoted("line\nnext\ttab\r"), R"("line\nnext\ttab\r")");
  EXPECT_EQ(json_quoted(std::string("\0\x1b\x7f", 3)), R"("\u0000\u001b\u007f")");
}

TEST(JsonWriter, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(json_quoted("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  const std::string replacement = "\xEF\xBF\xBD";
  EXPECT_EQ(json_quoted("a\xff"), "\"a" + replacement + "\"");
  EXPECT_EQ(json_quoted("\xc3"), "\"" + replacement + "\"");                    // cut short
  EXPECT_EQ(json_quoted("\xc0\xaf"), "\"" + replacement + replacement + "\"");  // overlong
  EXPECT_EQ(json_quoted("\xed\xa0\x80"),                                        // a surrogate
            "\"" + replacement + replacement + replacement + "\"");
}

TEST(JsonWriter, WhatItWritesReadsBack) {
  const std::string text = std::string("q\"b\\ c\n\x01\0", 10) + "caf\xc3\xa9";
  JsonWriter json;
  json.begin_object().key(text).begin_array().string(text).integer(-7).real(2.5);
  json.boolean(true).null().end_array().end_object();
  const nlohmann::json read = nlohmann::json::parse(json.str());
  const nlohmann::json& list = read.at(text);
  EXPECT_EQ(list.at(0).get<std::string>(), text);
  EXPECT_EQ(list.at(1).get<double>(), -7);
  EXPECT_EQ(list.at(2).get<double>(), 2.5);
  EXPECT_TRUE(list.at(3).get<bool>());
  EXPECT_TRUE(list.at(4).is_null());
}

TEST(JsonWriter, WritesNonFiniteNumbersAsNull) {
  JsonWriter json;
  json.begin_array().real(1.0 / 0.0).real(0.1).end_array();
  EXPECT_EQ(json.str(), "[null,0.1]");
}

TEST(Table, AlignsColumnsTwoSpacesApartWithoutTrailingSpaces) {
  Table table({{"KEY"}, {"N", true}, {"NOTE"}});
  table.add_row({"alice", "7", ""});
  table.add_row({"bo", "1234", "x"});
  EXPECT_EQ(table.render(),
            "KEY       N  NOTE\n"
            "alice     7\n"
            "bo     1234  x\n");
  EXPECT_EQ(render_fields({{"name", "sms"}, {"version", "3"}}),
            "name     sms\n"
            "version  3\n");
}

TEST(TextFormat, DurationsReadAsPeopleWriteThem) {
  EXPECT_EQ(format_duration(0us), "0");
  EXPECT_EQ(format_duration(850us), "850us");
  EXPECT_EQ(format_duration(12'500us), "12.5ms");
  EXPECT_EQ(format_duration(999'999us), "999.9ms");
  EXPECT_EQ(format_duration(200ms), "200ms");
  EXPECT_EQ(format_duration(3'250ms), "3.25s");
  EXPECT_EQ(format_duration(1'500ms), "1.5s");
  EXPECT_EQ(format_duration(1s), "1s");
  EXPECT_EQ(format_duration(245s), "4m05s");
  EXPECT_EQ(format_duration(150min), "2h30m");
  EXPECT_EQ(format_duration(30h), "1d06h");
}

TEST(TextFormat, TimesAreUtcToTheMillisecond) {
  EXPECT_EQ(format_utc(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(format_utc(1'740'830'405'250'999), "2025-03-01T12:00:05.250Z");
}

TEST(TextFormat, PrintableEscapesEverythingATerminalWouldInterpret) {
  EXPECT_EQ(printable("user:42 ok"), "user:42 ok");
  EXPECT_EQ(printable("\x1b[2J\n\\"), "\\x1b[2J\\x0a\\\\");
  EXPECT_EQ(printable("\xc3\xa9"), "\\xc3\\xa9");
}

TEST(TextFormat, IntervalsHaveAUnitAndAreFrom100msTo24h) {
  EXPECT_EQ(parse_interval("1s"), 1000ms);
  EXPECT_EQ(parse_interval("250ms"), 250ms);
  EXPECT_EQ(parse_interval("0.5s"), 500ms);
  EXPECT_EQ(parse_interval("2m"), 120'000ms);
  EXPECT_EQ(parse_interval("24h"), 86'400'000ms);
  for (const char* bad :
       {"", "1", "s", "99ms", "-1s", "25h", "1441m", "1e3ms", "inf s", "1 s", "nan"})
    EXPECT_EQ(parse_interval(bad), std::nullopt) << bad;
}

TEST(UrlRedaction, ReplacesThePasswordOnly) {
  EXPECT_EQ(redact_url("redis://app:s3cret@db:6380/2"), "redis://app:***@db:6380/2");
  EXPECT_EQ(redact_url("redis://s3cret@db"), "redis://***@db");
  EXPECT_EQ(redact_url("redis://db:6379"), "redis://db:6379");
  EXPECT_EQ(redact_url("unix://app:s3cret@/run/redis.sock?db=1"),
            "unix://app:***@/run/redis.sock?db=1");
  EXPECT_EQ(redact_url("redis-cluster://app:pw@a:1,b:2"), "redis-cluster://app:***@a:1,b:2");
  EXPECT_EQ(redact_url("redis://app:p@ss@db"), "redis://app:***@db");
  EXPECT_EQ(redact_url("p@ss@db"), "***@db");
}

TEST(UrlRedaction, RedactorScrubsThePasswordAsWrittenAndDecoded) {
  const Redactor redact("redis://app:p%40ss-word@db:6380");
  EXPECT_EQ(redact.shown_url(), "redis://app:***@db:6380");
  EXPECT_EQ(redact("cannot reach redis://app:p%40ss-word@db:6380 (refused)"),
            "cannot reach redis://app:***@db:6380 (refused)");
  EXPECT_EQ(redact("WRONGPASS p@ss-word and p%40ss-word"), "WRONGPASS *** and ***");
  EXPECT_EQ(Redactor("redis://db")("nothing to hide"), "nothing to hide");
}

TEST(UrlRedaction, TheSentinelsPasswordIsScrubbedToo) {
  const Redactor redact("redis-sentinel://data-pw@s1:26379,s2#mymaster", "sentinel-pw");
  EXPECT_EQ(redact.shown_url(), "redis-sentinel://***@s1:26379,s2#mymaster");
  EXPECT_EQ(redact("NOAUTH sentinel-pw; WRONGPASS data-pw"), "NOAUTH ***; WRONGPASS ***");
  // One password inside the other: the longer goes first, nothing of it is left.
  EXPECT_EQ(Redactor("redis-sentinel://pw@s1#m", "pw-longer")("pw-longer and pw"), "*** and ***");
}

// Found in review (not named by an issue): a short password was replaced wherever its bytes
// appeared, which garbled the text and gave the password away ("***27.0.0.***" for "1").
TEST(UrlRedaction, AShortPasswordIsScrubbedWhereItStandsAloneAndNowhereElse) {
  const Redactor one("redis://:1@127.0.0.1:6319");
  EXPECT_EQ(one("cannot connect to redis://127.0.0.1:6319"),
            "cannot connect to redis://127.0.0.1:6319");
  EXPECT_EQ(one("redis://:1@127.0.0.1:6319/0 refused"), "redis://:***@127.0.0.1:6319/0 refused");
  EXPECT_EQ(one("WRONGPASS 1"), "WRONGPASS ***");
  const Redactor letter("redis://:a@db");
  EXPECT_EQ(letter("Redis at db did not answer: cannot connect"),
            "Redis at db did not answer: cannot connect");
  EXPECT_EQ(letter("password 'a' refused"), "password '***' refused");
  // From 8 bytes on, a password is scrubbed wherever it appears.
  EXPECT_EQ(Redactor("redis://:longpass@db")("xlongpassx"), "x***x");
}

TEST(DecisionRates, RatesAreTheDifferencesPerSecond) {
  const CountsByName before{{"sms", {.allowed = 100, .denied = 10}}};
  const CountsByName after{{"sms", {.allowed = 180, .denied = 30, .shadow_denied = 4}}};
  const auto rows = activity_between(before, after, 2.0);
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_TRUE(rows[0].rates);
  EXPECT_DOUBLE_EQ(rows[0].rates->decisions, 50.0);
  EXPECT_DOUBLE_EQ(rows[0].rates->denied, 10.0);
  EXPECT_DOUBLE_EQ(rows[0].rates->shadow_denied, 2.0);
  EXPECT_DOUBLE_EQ(rows[0].rates->failure_policy, 0.0);
  EXPECT_DOUBLE_EQ(*rows[0].rates->denied_percent, 20.0);
  EXPECT_EQ(rows[0].totals, after.at("sms"));
}

TEST(DecisionRates, ANameWithoutAHashBeforeStartedFromZero) {
  const auto rows = activity_between({}, {{"api", {.allowed = 5}}}, 1.0);
  ASSERT_TRUE(rows.at(0).rates);
  EXPECT_DOUBLE_EQ(rows[0].rates->decisions, 5.0);
}

TEST(DecisionRates, CountsThatWentBackGiveNoRate) {
  const auto rows = activity_between({{"api", {.allowed = 50}}}, {{"api", {.allowed = 5}}}, 1.0);
  EXPECT_FALSE(rows.at(0).rates);
}

TEST(DecisionRates, NoDecisionsMeansNoDenialPercentage) {
  const auto rows = activity_between({{"api", {.allowed = 5}}}, {{"api", {.allowed = 5}}}, 1.0);
  ASSERT_TRUE(rows.at(0).rates);
  EXPECT_EQ(rows[0].rates->denied_percent, std::nullopt);
}

TEST(DecisionRates, TheTotalAddsUpEveryName) {
  const auto rows = activity_between(
      {{"a", {.allowed = 10}}, {"b", {.allowed = 50}}},
      {{"a", {.allowed = 20, .denied = 10}}, {"b", {.allowed = 40}}, {"c", {.allowed = 10}}}, 1.0);
  const LimiterActivity total = total_of(rows);
  EXPECT_EQ(total.totals.allowed, 70);
  EXPECT_EQ(total.totals.denied, 10);
  ASSERT_TRUE(total.rates);
  EXPECT_DOUBLE_EQ(total.rates->decisions, 30.0);  // b went back: no rate of its own
  EXPECT_DOUBLE_EQ(*total.rates->denied_percent, 100.0 / 3.0);
}

TEST(DecisionRates, NoLimitersAtAllDecideNothing) {
  const LimiterActivity total = total_of({});
  ASSERT_TRUE(total.rates);
  EXPECT_EQ(total.rates->decisions, 0);
  EXPECT_EQ(total.rates->denied_percent, std::nullopt);
}

/// A limit's state with `remaining` of `capacity` left, passing again in `retry_us`.
redlimit::LimitState limit_state(std::int64_t remaining, std::int64_t capacity,
                                 std::int64_t retry_us) {
  redlimit::LimitState state;
  state.state.remaining = remaining;
  state.state.limit = capacity;
  state.state.retry_after = std::chrono::microseconds(retry_us);
  return state;
}

/// A key whose limits are `limits`, as top_keys() makes it.
KeyState key_state(std::string key, std::vector<redlimit::LimitState> limits) {
  KeyState state{.key = std::move(key), .limits = std::move(limits)};
  state.nearest = nearest_limit(state.limits);
  return state;
}

TEST(Top, KeysNearestTheirLimitsComeFirst) {
  std::vector<KeyState> keys{key_state("half", {limit_state(5, 10, 0)}),
                             key_state("full", {limit_state(100, 100, 0)}),
                             key_state("empty-soon", {limit_state(0, 10, 100)}),
                             key_state("empty-later", {limit_state(0, 1000, 900)}),
                             key_state("tenth", {limit_state(10, 100, 0)})};
  sort_nearest_first(keys);
  std::vector<std::string> order;
  for (const KeyState& key : keys)
    order.push_back(key.key);
  EXPECT_EQ(order,
            (std::vector<std::string>{"empty-later", "empty-soon", "tenth", "half", "full"}));
}

TEST(Top, AKeyIsAsNearAsItsNearestLimitNotItsBindingOne) {
  // The rate limit has the fewest permits left (5), the daily one the smallest share (0.8%).
  const KeyState daily_nearly_spent =
      key_state("daily", {limit_state(5, 20, 0), limit_state(8, 1000, 0)});
  EXPECT_EQ(daily_nearly_spent.nearest, 1u);
  std::vector<KeyState> keys{key_state("rate", {limit_state(1, 20, 0), limit_state(900, 1000, 0)}),
                             daily_nearly_spent};
  sort_nearest_first(keys);
  EXPECT_EQ(keys.front().key, "daily");
}

/// Parses `words` as the command line; throws CLI::ParseError as main() would see it.
Invocation parse(std::vector<std::string> words) {
  CLI::App app;
  Invocation invocation;
  add_commands(app, invocation);
  std::vector<const char*> argv{"redlimit"};
  for (const std::string& word : words)
    argv.push_back(word.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return invocation;
}

TEST(CommandLine, GlobalOptionsMayFollowTheSubcommand) {
  const Invocation invocation =
      parse({"policy", "get", "sms", "--json", "--prefix", "app", "--url", "redis://h:1"});
  EXPECT_TRUE(invocation.global.json);
  EXPECT_EQ(invocation.global.prefix, "app");
  EXPECT_EQ(invocation.global.url, "redis://h:1");
  EXPECT_EQ(invocation.args.name, "sms");
  EXPECT_TRUE(invocation.body);
}

TEST(CommandLine, TheUrlComesFromREDLIMIT_URLUnlessGiven) {
  setenv("REDLIMIT_URL", "redis://from-env:7000", 1);
  EXPECT_EQ(parse({"policy", "get", "sms"}).global.url, "redis://from-env:7000");
  EXPECT_EQ(parse({"--url", "redis://given:1", "policy", "get", "sms"}).global.url,
            "redis://given:1");
  unsetenv("REDLIMIT_URL");
  EXPECT_EQ(parse({"policy", "get", "sms"}).global.url, "redis://127.0.0.1:6379");
}

TEST(CommandLine, AKeyMayBeNamedLikeASubcommand) {
  const Invocation invocation = parse({"inspect", "sms", "policy"});
  EXPECT_EQ(invocation.args.name, "sms");
  EXPECT_EQ(invocation.args.key, "policy");
}

TEST(CommandLine, BadArgumentsAreParseErrors) {
  EXPECT_THROW(parse({}), CLI::ParseError);
  EXPECT_THROW(parse({"policy"}), CLI::ParseError);
  EXPECT_THROW(parse({"policy", "set", "sms", "gcra ten/s"}), CLI::ParseError);
  EXPECT_THROW(parse({"policy", "set", "sms", "gcra 1/s", "--carry", "most"}), CLI::ParseError);
  EXPECT_THROW(parse({"inspect", "sms"}), CLI::ParseError);
  EXPECT_THROW(parse({"top", "sms", "--count", "0"}), CLI::ParseError);
  EXPECT_THROW(parse({"watch", "--interval", "10ms"}), CLI::ParseError);
}

TEST(CommandLine, CarryAndWatchOptionsAreRead) {
  EXPECT_EQ(parse({"policy", "set", "sms", "gcra 1/s", "--carry", "proportional"}).args.carry,
            redlimit::Carry::proportional);
  const Invocation watch = parse({"watch", "a", "b", "--interval", "250ms", "--once"});
  EXPECT_EQ(watch.args.names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(watch.args.interval, "250ms");
  EXPECT_TRUE(watch.args.once);
}

}  // namespace
}  // namespace redlimit_cli
