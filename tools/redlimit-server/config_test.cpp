// redlimit-server's configuration: envoyproxy/ratelimit's YAML (one domain per file) with its
// matching rules, redlimit's extensions, and errors that name the file, line and field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "config_watch.hpp"
#include "descriptor_match.hpp"
#include "rate_limit_config.hpp"

namespace redlimit_server {
namespace {

/// envoyproxy/ratelimit's README examples, as one domain.
constexpr std::string_view example = R"(domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 5
  - key: to_number
    descriptors:
      - key: from_number
        rate_limit:
          unit: day
          requests_per_unit: 100
  - key: database
    value: users
    rate_limit:
      unit: SECOND
      requests_per_unit: 500
  - key: path
    value: /api/*
    rate_limit:
      unit: minute
      requests_per_unit: 60
  - key: client_id
    detailed_metric: true
    rate_limit:
      unit: hour
      requests_per_unit: 1000
  - key: bypass
    rate_limit:
      unlimited: true
)";

RateLimitConfig config_of(std::string_view text, const std::string& file = "edge.yaml") {
  RateLimitConfig config;
  DomainConfig domain = parse_domain(text, file);
  config.domains.emplace(domain.name, std::move(domain));
  return config;
}

std::optional<MatchedLimit> match(const RateLimitConfig& config,
                                  std::vector<DescriptorEntry> entries,
                                  std::string_view domain = "edge_proxy_per_ip") {
  return match_limit(config, domain, entries);
}

/// A new directory under /tmp, removed with what it holds when the test ends.
struct ScratchDirectory {
  ScratchDirectory() {
    char pattern[] = "/tmp/redlimit-server-config-XXXXXX";
    if (mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = pattern;
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
  ~ScratchDirectory() { std::filesystem::remove_all(path); }

  std::filesystem::path path;
};

/// The message of the ConfigFileError that parsing `text` raises.
std::string error_of(std::string_view text) {
  try {
    parse_domain(text, "bad.yaml");
  } catch (const ConfigFileError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ServerConfig, ReadsEnvoyproxyRatelimitsExamplesAsTheyAre) {
  const RateLimitConfig config = config_of(example);
  const DomainConfig& domain = config.domains.at("edge_proxy_per_ip");
  EXPECT_EQ(domain.root.children.size(), 7u);
  const LimitConfig& users = *domain.root.children.at("database_users").limit;
  EXPECT_EQ(users.requests_per_unit, 500u);
  EXPECT_EQ(users.unit, TimeUnit::second) << "units are case-insensitive";
  EXPECT_EQ(users.full_key, "edge_proxy_per_ip.database_users");
  EXPECT_EQ(users.algorithm, redlimit::Algorithm::fixed_window);
  EXPECT_EQ(to_string(users.where), "edge.yaml:21") << "where its rate_limit begins";
  EXPECT_TRUE(domain.root.children.at("bypass").limit->unlimited);
  EXPECT_EQ(domain.on_failure.kind, std::nullopt)
      << "without on_failure a call Redis cannot answer fails, as envoyproxy/ratelimit's does";
  EXPECT_FALSE(domain.all_or_nothing);
}

TEST(ServerConfig, AKeyAndValueBeatsTheKeyAlone) {
  const RateLimitConfig config = config_of(example);
  EXPECT_EQ(match(config, {{"remote_address", "50.0.0.5"}})->limit->requests_per_unit, 5u);
  EXPECT_EQ(match(config, {{"remote_address", "10.0.0.1"}})->limit->requests_per_unit, 10u);
}

TEST(ServerConfig, ALimitAppliesOnlyWhereTheLastEntryLands) {
  const RateLimitConfig config = config_of(example);
  EXPECT_FALSE(match(config, {{"to_number", "1"}})) << "no limit at depth 1";
  const auto nested = match(config, {{"to_number", "1"}, {"from_number", "2"}});
  ASSERT_TRUE(nested);
  EXPECT_EQ(nested->limit->full_key, "edge_proxy_per_ip.to_number.from_number");
  EXPECT_FALSE(match(config, {{"remote_address", "1"}, {"extra", "x"}}))
      << "a deeper descriptor than the configuration has no limit";
  EXPECT_FALSE(match(config, {{"unknown", "x"}}));
  EXPECT_FALSE(match(config, {{"remote_address", "1"}}, "other_domain"));
}

TEST(ServerConfig, AValueEndingInAStarMatchesEveryValueItBegins) {
  const RateLimitConfig config = config_of(example);
  const auto api = match(config, {{"path", "/api/users"}});
  ASSERT_TRUE(api);
  EXPECT_EQ(api->limit->requests_per_unit, 60u);
  EXPECT_FALSE(match(config, {{"path", "/static/x"}}));
}

TEST(ServerConfig, AMissingRequestsPerUnitIsZero) {
  const RateLimitConfig config =
      config_of("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second}\n");
  EXPECT_EQ(config.domains.at("d").root.children.at("a").limit->requests_per_unit, 0u)
      << "as envoyproxy/ratelimit reads it";
}

TEST(ServerConfig, ALimitNamedInAnotherMatchedLimitsReplacesIsDropped) {
  const RateLimitConfig config = config_of(R"(domain: d
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10, name: per_user}
  - key: vip
    rate_limit:
      unit: minute
      requests_per_unit: 1000
      name: vip
      replaces: [{name: per_user}]
)");
  std::vector<std::optional<MatchedLimit>> matched = {match(config, {{"user", "a"}}, "d"),
                                                      match(config, {{"vip", "a"}}, "d")};
  apply_replaces(matched);
  EXPECT_FALSE(matched[0]);
  ASSERT_TRUE(matched[1]);
  EXPECT_EQ(matched[1]->limit->name, "vip");
}

TEST(ServerConfig, RedlimitsExtensionsChooseTheAlgorithmPerLimitOrPerDomain) {
  const RateLimitConfig config = config_of(R"(domain: d
algorithm: gcra
burst: 5
all_or_nothing: true
on_failure: local
local_share: 0.25
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 60, algorithm: sliding_window_log, burst: 0}
)");
  const DomainConfig& domain = config.domains.at("d");
  EXPECT_TRUE(domain.all_or_nothing);
  EXPECT_EQ(domain.on_failure.kind, redlimit::FailurePolicy::local_fallback);
  EXPECT_DOUBLE_EQ(domain.on_failure.local_share, 0.25);
  const LimitConfig& a = *domain.root.children.at("a").limit;
  EXPECT_EQ(a.algorithm, redlimit::Algorithm::gcra);
  EXPECT_EQ(a.limit(), redlimit::Limit::gcra("100/s", 5));
  const LimitConfig& b = *domain.root.children.at("b").limit;
  EXPECT_EQ(b.limit(), redlimit::Limit::sliding_window_log("60/min"));
}

TEST(ServerConfig, TheDefaultLimitIsAFixedWindowOfTheUnit) {
  const RateLimitConfig config = config_of(example);
  EXPECT_EQ(match(config, {{"to_number", "1"}, {"from_number", "2"}})->limit->limit(),
            redlimit::Limit::fixed_window("100/day"));
  LimitConfig month;
  month.requests_per_unit = 7;
  month.unit = TimeUnit::month;
  EXPECT_EQ(month.limit().rate.period, std::chrono::hours(24 * 30));
}

TEST(ServerConfig, ErrorsNameTheFileTheLineAndTheField) {
  EXPECT_EQ(error_of("domain: d\ndescriptors:\n  - key: a\n    rate_limt: {}\n"),
            "bad.yaml:4: 'rate_limt' is not a field of a descriptor");
  EXPECT_EQ(error_of("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: fortnight\n"
                     "      requests_per_unit: 1\n"),
            "bad.yaml:5: unit must be second, minute, hour, day, month or year; got 'fortnight'");
  EXPECT_EQ(error_of("domain: d\ndescriptors:\n  - key: a\n  - key: a\n"),
            "bad.yaml:4: descriptor 'd.a' is defined twice");
  EXPECT_EQ(error_of("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unlimited: true, "
                     "unit: second}\n"),
            "bad.yaml:4: unit must not be given for an unlimited limit");
  EXPECT_EQ(error_of("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, "
                     "requests_per_unit: -1}\n"),
            "bad.yaml:4: requests_per_unit must be a whole number from 0 to 4294967295");
  EXPECT_EQ(error_of("descriptors: []\n"), "bad.yaml:1: domain cannot be empty");
  EXPECT_EQ(error_of("domain: d\ndescriptors:\n  - key: a\n    key: b\n"),
            "bad.yaml:4: 'key' is given twice (YAML readers differ on which one counts)");
  EXPECT_EQ(error_of("domain: d\non_failure: local\n"),
            "bad.yaml:2: on_failure: local needs local_share, in (0, 1]");
  EXPECT_EQ(error_of("domain: d\nalgorithm: leaky\n"),
            "bad.yaml:2: algorithm must be one of gcra, token_bucket, leaky_bucket, "
            "fixed_window, sliding_window_log, sliding_window_counter; got 'leaky'");
  EXPECT_TRUE(error_of("domain: [d\n").starts_with("bad.yaml:")) << error_of("domain: [d\n");
  // Found in review (not named by an issue): values the library refuses were taken here, and
  // the limit failed later, when it was written to the store, leaving the limits after it
  // unwritten (and allowing every call).
  EXPECT_EQ(error_of("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, "
                     "requests_per_unit: 20000, algorithm: sliding_window_log}\n"),
            "bad.yaml:4: rate_limit cannot be enforced: policy.limits[0].rate.permits must be at "
            "most 10000 for sliding_window_log, which stores one entry per permit (got 20000); "
            "use sliding_window_counter for larger limits");
}

TEST(ServerConfig, AFieldEnvoyproxyRatelimitKnowsIsIgnoredOutOfItsPlaceAsItIgnoresIt) {
  // It checks every level's keys against one list of every field, so a file with a field in the
  // wrong place runs there: it runs here too, with a warning that names the place.
  const DomainConfig domain = parse_domain(R"(domain: d
descriptors:
  - key: a
    rate_limit:
      shadow_mode: true
      unit: second
      requests_per_unit: 5
)",
                                           "moved.yaml");
  ASSERT_TRUE(domain.root.children.at("a").limit);
  EXPECT_FALSE(domain.root.children.at("a").limit->shadow_mode);
  EXPECT_EQ(domain.ignored,
            std::vector<std::string>{"moved.yaml:5: 'shadow_mode' is not a field of rate_limit: "
                                     "ignored, as envoyproxy/ratelimit ignores it there"});
}

TEST(ServerConfig, ALimitWhoseFullKeyIsTooLongForANameIsNamedByItsHash) {
  // A name is 1 to 128 bytes; envoyproxy/ratelimit has no such bound, and long nested values
  // reach it. The name keeps the key's start and ends in a hash of all of it.
  const std::string path(150, 'p');
  const std::string text = "domain: d\ndescriptors:\n  - key: path\n    value: /" + path +
                           "\n    rate_limit: {unit: second, requests_per_unit: 1}\n  - key: "
                           "path\n    value: /" +
                           path + "x\n    rate_limit: {unit: second, requests_per_unit: 1}\n";
  const DomainConfig domain = parse_domain(text, "long.yaml");
  const std::string& one = domain.root.children.at("path_/" + path).limit->full_key;
  const std::string& other = domain.root.children.at("path_/" + path + "x").limit->full_key;
  EXPECT_LE(one.size(), 128u);
  EXPECT_TRUE(one.starts_with("d.path_/ppp")) << one;
  EXPECT_NE(one, other) << "two keys, two names";
  EXPECT_EQ(one, parse_domain(text, "again.yaml").root.children.at("path_/" + path).limit->full_key)
      << "every replica names it alike";
}

TEST(ServerConfig, ADirectoryIsOneDomainPerFileAndADomainTwiceIsAnError) {
  const ScratchDirectory scratch;
  const std::filesystem::path& dir = scratch.path;
  std::ofstream(dir / "a.yaml") << "domain: one\n";
  std::ofstream(dir / "b.yml") << "domain: two\n";
  const RateLimitConfig config = load_config(dir);
  EXPECT_EQ(config.domains.size(), 2u);
  EXPECT_EQ(load_config(dir / "b.yml").domains.count("two"), 1u);
  std::ofstream(dir / "c.yaml") << "\n\ndomain: one\n";
  try {
    load_config(dir);
    ADD_FAILURE() << "a domain defined twice was taken";
  } catch (const ConfigFileError& e) {
    EXPECT_EQ(std::string(e.what()), (dir / "c.yaml").string() +
                                         ":3: domain 'one' is also defined in " +
                                         (dir / "a.yaml").string());
  }
}

// Found in review (not named by an issue): a file replaced by another of the same size and
// time of last write (`cp -p`, `rsync -a`, `tar x`, an edit within the file system's time
// resolution) was never read again.
TEST(ServerConfig, AFileReplacedByOneOfTheSameSizeAndWriteTimeIsAChange) {
  const ScratchDirectory scratch;
  const std::filesystem::path& dir = scratch.path;
  const std::string limit = "domain: one\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, ";
  std::ofstream(dir / "a.yaml") << limit << "requests_per_unit: 30}\n";
  ConfigWatch watch(dir);
  EXPECT_FALSE(watch.changed());
  std::ofstream(dir / "next") << limit << "requests_per_unit: 40}\n";
  std::filesystem::last_write_time(dir / "next", std::filesystem::last_write_time(dir / "a.yaml"));
  std::filesystem::rename(dir / "next", dir / "a.yaml");
  EXPECT_TRUE(watch.changed());
  EXPECT_FALSE(watch.changed());
}

TEST(ServerConfig, ADomainInSeveralFilesIsMergedWhenAskedAsEnvoyproxyRatelimitMergesIt) {
  // Its MERGE_DOMAIN_CONFIG: the files' descriptors join one domain; one twice is an error.
  const ScratchDirectory scratch;
  const std::filesystem::path& dir = scratch.path;
  std::ofstream(dir / "a.yaml") << "domain: d\ndescriptors:\n  - key: user\n"
                                   "    rate_limit: {unit: second, requests_per_unit: 1}\n";
  std::ofstream(dir / "b.yaml") << "domain: d\ndescriptors:\n  - key: team\n"
                                   "    rate_limit: {unit: minute, requests_per_unit: 2}\n";
  EXPECT_THROW(load_config(dir), ConfigFileError) << "not asked: a domain twice is an error";
  const RateLimitConfig merged = load_config(dir, true);
  ASSERT_EQ(merged.domains.size(), 1u);
  EXPECT_EQ(merged.domains.at("d").root.children.size(), 2u);
  EXPECT_EQ(match(merged, {{"team", "x"}}, "d")->limit->requests_per_unit, 2u);
  std::ofstream(dir / "c.yaml") << "domain: d\ndescriptors:\n  - key: user\n"
                                   "    rate_limit: {unit: hour, requests_per_unit: 3}\n";
  try {
    load_config(dir, true);
    ADD_FAILURE() << "a descriptor in two files was taken";
  } catch (const ConfigFileError& e) {
    EXPECT_EQ(std::string(e.what()), (dir / "c.yaml").string() +
                                         ":3: descriptor 'd.user' is also defined in " +
                                         (dir / "a.yaml").string());
  }
  std::ofstream(dir / "c.yaml") << "domain: d\non_failure: deny\ndescriptors: []\n";
  EXPECT_THROW(load_config(dir, true), ConfigFileError)
      << "the files of one domain differ in redlimit's domain fields";
}

TEST(ServerConfig, ADirectoryIsReadAsEnvoyproxyRatelimitReadsIt) {
  // Every file below it, whatever its name, subdirectories too; not what a name starting with
  // '.' hides (a Kubernetes ConfigMap's `..data` holds what its links point to).
  const ScratchDirectory scratch;
  const std::filesystem::path& dir = scratch.path;
  std::filesystem::create_directories(dir / "team" / "api");
  std::filesystem::create_directories(dir / "..2026_12_02" / "nested");
  std::ofstream(dir / "ratelimit") << "domain: plain\n";
  std::ofstream(dir / "team" / "api" / "limits.conf") << "domain: nested\n";
  std::ofstream(dir / "..2026_12_02" / "edge.yaml") << "domain: edge\n";
  std::ofstream(dir / "..2026_12_02" / "nested" / "more.yaml") << "domain: hidden\n";
  std::ofstream(dir / ".edge.yaml.swp") << "not a configuration\n";
  std::filesystem::create_directory_symlink("..2026_12_02", dir / "..data");
  std::filesystem::create_symlink("..data/edge.yaml", dir / "edge.yaml");
  // A ConfigMap's item with a path of its own is a link to a directory under `..data`.
  std::filesystem::create_directory_symlink("..data/nested", dir / "linked");
  std::filesystem::create_directory_symlink(".", dir / "team" / "loop");
  const RateLimitConfig config = load_config(dir);
  EXPECT_EQ(config.domains.size(), 4u);
  EXPECT_EQ(config.domains.count("plain"), 1u) << "a file without an extension";
  EXPECT_EQ(config.domains.count("nested"), 1u) << "a file in a subdirectory, once";
  EXPECT_EQ(config.domains.count("edge"), 1u) << "through its link, once";
  EXPECT_EQ(config.domains.count("hidden"), 1u) << "through a link to a directory";
  std::filesystem::create_symlink("gone.yaml", dir / "dangling.yaml");
  EXPECT_THROW(load_config(dir), ConfigFileError) << "a link to nothing is an error";
  std::filesystem::remove(dir / "dangling.yaml");
  std::ofstream(dir / "notes.txt") << "not a configuration\n";
  EXPECT_THROW(load_config(dir), ConfigFileError) << "a file that is not one is an error";
}

}  // namespace
}  // namespace redlimit_server
