#include "rate_limit_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "redlimit/errors.hpp"

namespace redlimit_server {
namespace {

using namespace std::chrono_literals;

/// The longest limit name a Limiter and the PolicyStore take.
constexpr std::size_t max_name_bytes = 128;

/// Reads one domain's YAML, naming the file and line of every error.
class DomainReader {
 public:
  explicit DomainReader(std::string file) : file_(std::move(file)) {}

  DomainConfig read(const YAML::Node& root) {
    if (!root.IsMap()) fail(root, "the file", "is not a mapping of 'domain' and 'descriptors'");
    check_keys(root, "the file",
               {"domain", "descriptors", "algorithm", "burst", "all_or_nothing", "on_failure",
                "local_share"});
    DomainConfig domain;
    domain.where = where(root);
    domain.name = text(root, "domain", "the file");
    if (domain.name.empty()) fail(root, "domain", "cannot be empty");
    if (const YAML::Node node = root["algorithm"]) default_algorithm_ = algorithm(node);
    if (const YAML::Node node = root["burst"]) default_burst_ = count(node, "burst");
    if (const YAML::Node node = root["all_or_nothing"])
      domain.all_or_nothing = boolean(node, "all_or_nothing");
    domain.on_failure = failure(root);
    read_descriptors(root["descriptors"], name_part(domain.name) + ".", domain.root);
    domain.ignored = std::move(ignored_);
    return domain;
  }

 private:
  [[noreturn]] void fail(const YAML::Node& node, std::string_view field, std::string_view what) {
    throw ConfigFileError(to_string(where(node)) + ": " + std::string(field) + " " +
                          std::string(what));
  }

  Location where(const YAML::Node& node) const {
    const YAML::Mark mark = node.Mark();
    return Location{file_, mark.is_null() ? 0 : mark.line + 1};
  }

  /// Refuses any key of `map` not in `known`, as envoyproxy/ratelimit does, but one of its
  /// fields out of its place: it checks every level against one list of every field, so a file
  /// with one runs there. That one is ignored (DomainConfig::ignored).
  void check_keys(const YAML::Node& map, std::string_view owner,
                  std::initializer_list<std::string_view> known) {
    constexpr std::array envoyproxy_fields = {"domain",
                                              "key",
                                              "value",
                                              "descriptors",
                                              "rate_limit",
                                              "unit",
                                              "requests_per_unit",
                                              "unlimited",
                                              "shadow_mode",
                                              "name",
                                              "replaces",
                                              "detailed_metric"};
    std::set<std::string, std::less<>> seen;
    for (const auto& item : map) {
      const std::string key = item.first.Scalar();
      // Why an error: which one counts is the reader's choice (yaml-cpp takes the first,
      // envoyproxy/ratelimit's reader the last).
      if (!seen.insert(key).second)
        fail(item.first, "'" + key + "'",
             "is given twice (YAML readers differ on which one counts)");
      if (std::find(known.begin(), known.end(), key) != known.end()) continue;
      const std::string what = "is not a field of " + std::string(owner);
      if (std::find(envoyproxy_fields.begin(), envoyproxy_fields.end(), key) ==
          envoyproxy_fields.end()) {
        fail(item.first, "'" + key + "'", what);
      }
      ignored_.push_back(to_string(where(item.first)) + ": '" + key + "' " + what +
                         ": ignored, as envoyproxy/ratelimit ignores it there");
    }
  }

  std::string text(const YAML::Node& map, const char* field, std::string_view owner) {
    const YAML::Node node = map[field];
    if (!node || node.IsNull()) return {};
    if (!node.IsScalar()) fail(node, field, "of " + std::string(owner) + " must be a string");
    return node.Scalar();
  }

  bool boolean(const YAML::Node& node, std::string_view field) {
    bool value = false;
    if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value))
      fail(node, field, "must be true or false");
    return value;
  }

  std::int64_t count(const YAML::Node& node, std::string_view field,
                     std::int64_t most = std::numeric_limits<std::uint32_t>::max()) {
    const std::string& scalar = node.IsScalar() ? node.Scalar() : std::string();
    std::int64_t value = -1;
    std::istringstream in(scalar);
    if (scalar.empty() || scalar.find_first_not_of("0123456789") != std::string::npos ||
        !(in >> value) || value > most) {
      fail(node, field, "must be a whole number from 0 to " + std::to_string(most));
    }
    return value;
  }

  redlimit::Algorithm algorithm(const YAML::Node& node) {
    constexpr std::array algorithms = {redlimit::Algorithm::gcra,
                                       redlimit::Algorithm::token_bucket,
                                       redlimit::Algorithm::leaky_bucket,
                                       redlimit::Algorithm::fixed_window,
                                       redlimit::Algorithm::sliding_window_log,
                                       redlimit::Algorithm::sliding_window_counter};
    const std::string name = node.IsScalar() ? node.Scalar() : std::string();
    for (const redlimit::Algorithm candidate : algorithms) {
      if (redlimit::to_string(candidate) == name) return candidate;
    }
    fail(node, "algorithm",
         "must be one of gcra, token_bucket, leaky_bucket, fixed_window, sliding_window_log, "
         "sliding_window_counter; got '" +
             name + "'");
  }

  FailureConfig failure(const YAML::Node& root) {
    FailureConfig out;
    if (const YAML::Node node = root["on_failure"]) {
      const std::string kind = node.IsScalar() ? node.Scalar() : std::string();
      if (kind == "error") {
        out.kind = std::nullopt;
      } else if (kind == "allow") {
        out.kind = redlimit::FailurePolicy::fail_open;
      } else if (kind == "deny") {
        out.kind = redlimit::FailurePolicy::fail_closed;
      } else if (kind == "local") {
        out.kind = redlimit::FailurePolicy::local_fallback;
      } else {
        fail(node, "on_failure", "must be error, allow, deny or local; got '" + kind + "'");
      }
    }
    if (const YAML::Node node = root["local_share"]) {
      double share = 0;
      if (out.kind != redlimit::FailurePolicy::local_fallback)
        fail(node, "local_share", "is only for on_failure: local");
      if (!node.IsScalar() || !YAML::convert<double>::decode(node, share) || !(share > 0) ||
          share > 1) {
        fail(node, "local_share", "must be a number in (0, 1]");
      }
      out.local_share = share;
    } else if (out.kind == redlimit::FailurePolicy::local_fallback) {
      fail(root["on_failure"], "on_failure: local", "needs local_share, in (0, 1]");
    }
    return out;
  }

  void read_descriptors(const YAML::Node& list, const std::string& parent_key,
                        DescriptorNode& into) {
    if (!list || list.IsNull()) return;
    if (!list.IsSequence()) fail(list, "descriptors", "must be a list");
    for (const YAML::Node& item : list) {
      if (!item.IsMap()) fail(item, "a descriptor", "must be a mapping with a 'key'");
      check_keys(item, "a descriptor",
                 {"key", "value", "rate_limit", "descriptors", "shadow_mode", "detailed_metric"});
      const std::string key = text(item, "key", "a descriptor");
      if (key.empty()) fail(item, "key", "of a descriptor cannot be empty");
      const std::string value = text(item, "value", "a descriptor");
      const std::string final_key = value.empty() ? key : key + "_" + value;
      const std::string full_key = parent_key + name_part(final_key);
      if (into.children.contains(final_key))
        fail(item, "descriptor", "'" + full_key + "' is defined twice");
      DescriptorNode node;
      node.where = where(item);
      if (const YAML::Node limit = item["rate_limit"]) {
        node.limit = read_limit(limit, limit_name(full_key));
        if (const YAML::Node shadow = item["shadow_mode"])
          node.limit->shadow_mode = boolean(shadow, "shadow_mode");
        if (const YAML::Node detailed = item["detailed_metric"])
          node.limit->detailed_metric = boolean(detailed, "detailed_metric");
      }
      read_descriptors(item["descriptors"], full_key + ".", node);
      if (final_key.ends_with('*')) into.wildcard_keys.push_back(final_key);
      into.children.emplace(final_key, std::move(node));
    }
  }

  LimitConfig read_limit(const YAML::Node& map, const std::string& full_key) {
    if (!map.IsMap()) fail(map, "rate_limit", "must be a mapping");
    check_keys(
        map, "rate_limit",
        {"requests_per_unit", "unit", "unlimited", "name", "replaces", "algorithm", "burst"});
    LimitConfig limit;
    limit.full_key = full_key;
    limit.where = where(map);
    limit.algorithm = default_algorithm_;
    limit.burst = default_burst_;
    if (const YAML::Node node = map["unlimited"]) limit.unlimited = boolean(node, "unlimited");
    const std::string unit = text(map, "unit", "rate_limit");
    if (limit.unlimited) {
      if (!unit.empty()) fail(map["unit"], "unit", "must not be given for an unlimited limit");
    } else {
      limit.unit = time_unit(map, unit);
      // Why 0 without one: envoyproxy/ratelimit reads a missing requests_per_unit so.
      if (const YAML::Node requests = map["requests_per_unit"]) {
        limit.requests_per_unit = static_cast<std::uint32_t>(count(requests, "requests_per_unit"));
      }
    }
    limit.name = text(map, "name", "rate_limit");
    if (const YAML::Node list = map["replaces"]) {
      if (!list.IsSequence()) fail(list, "replaces", "must be a list of {name: ...}");
      for (const YAML::Node& item : list) {
        if (!item.IsMap()) fail(item, "replaces", "entries must be {name: ...}");
        check_keys(item, "a replaces entry", {"name"});
        const std::string name = text(item, "name", "a replaces entry");
        if (name.empty()) fail(item, "replaces", "entries need a name");
        if (name == limit.name) fail(item, "replaces", "cannot name its own limit");
        limit.replaces.push_back(name);
      }
    }
    if (const YAML::Node node = map["algorithm"]) limit.algorithm = algorithm(node);
    if (const YAML::Node node = map["burst"]) limit.burst = count(node, "burst");
    // Why here: a limit the library refuses would fail only once written to the store.
    if (!limit.unlimited && limit.requests_per_unit > 0) {
      try {
        redlimit::check_policy(redlimit::Policy::of(limit.limit()));
      } catch (const redlimit::InvalidArgument& e) {
        fail(map, "rate_limit", std::string("cannot be enforced: ") + e.what());
      }
    }
    return limit;
  }

  TimeUnit time_unit(const YAML::Node& map, std::string name) {
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    for (const TimeUnit unit : {TimeUnit::second, TimeUnit::minute, TimeUnit::hour, TimeUnit::day,
                                TimeUnit::month, TimeUnit::year}) {
      if (to_string(unit) == name) return unit;
    }
    fail(map["unit"] ? map["unit"] : map, "unit",
         "must be second, minute, hour, day, month or year; got '" + name + "'");
  }

  std::string file_;
  redlimit::Algorithm default_algorithm_ = redlimit::Algorithm::fixed_window;
  std::int64_t default_burst_ = 0;
  std::vector<std::string> ignored_;  ///< see check_keys()
};

}  // namespace

std::chrono::seconds unit_length(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::second:
      return 1s;
    case TimeUnit::minute:
      return 60s;
    case TimeUnit::hour:
      return 3600s;
    case TimeUnit::day:
      return 86400s;
    case TimeUnit::month:
      return 30 * 86400s;
    case TimeUnit::year:
      return 365 * 86400s;
  }
  return 1s;
}

std::string_view to_string(TimeUnit unit) {
  static constexpr std::array<std::string_view, 7> names = {"",    "second", "minute", "hour",
                                                            "day", "month",  "year"};
  return names[static_cast<std::size_t>(unit)];
}

std::string to_string(const Location& where) {
  return where.file + ":" + std::to_string(where.line);
}

redlimit::Limit LimitConfig::limit() const {
  const redlimit::Rate rate{static_cast<std::int64_t>(requests_per_unit),
                            std::chrono::microseconds(unit_length(unit))};
  switch (algorithm) {
    case redlimit::Algorithm::gcra:
      return redlimit::Limit::gcra(rate, burst);
    case redlimit::Algorithm::token_bucket:
      return redlimit::Limit::token_bucket(rate, burst);
    case redlimit::Algorithm::leaky_bucket:
      return redlimit::Limit::leaky_bucket(rate, burst);
    case redlimit::Algorithm::fixed_window:
      return redlimit::Limit::fixed_window(rate);
    case redlimit::Algorithm::sliding_window_log:
      return redlimit::Limit::sliding_window_log(rate);
    case redlimit::Algorithm::sliding_window_counter:
      return redlimit::Limit::sliding_window_counter(rate);
  }
  return redlimit::Limit::fixed_window(rate);
}

namespace {

/// Merges `more`, another file of `into`'s domain, into it, as envoyproxy/ratelimit merges one:
/// its top-level descriptors join the domain's; one the domain has already is an error.
void merge_into(DomainConfig& into, DomainConfig more) {
  const bool same_fields =
      into.all_or_nothing == more.all_or_nothing && into.on_failure == more.on_failure;
  if (!same_fields) {
    throw ConfigFileError(to_string(more.where) + ": domain '" + more.name +
                          "' has other all_or_nothing or on_failure than in " + into.where.file);
  }
  for (auto& [key, node] : more.root.children) {
    if (const auto it = into.root.children.find(key); it != into.root.children.end()) {
      throw ConfigFileError(to_string(node.where) + ": descriptor '" + more.name + "." + key +
                            "' is also defined in " + it->second.where.file);
    }
  }
  for (auto& [key, node] : more.root.children)
    into.root.children.emplace(key, std::move(node));
  into.root.wildcard_keys.insert(into.root.wildcard_keys.end(), more.root.wildcard_keys.begin(),
                                 more.root.wildcard_keys.end());
  into.ignored.insert(into.ignored.end(), more.ignored.begin(), more.ignored.end());
}

}  // namespace

std::string name_part(std::string_view part) {
  if (part.find_first_of(".%") == std::string_view::npos) return std::string(part);
  std::string out;
  for (const char c : part) {
    if (c == '.') {
      out += "%2E";
    } else if (c == '%') {
      out += "%25";
    } else {
      out += c;
    }
  }
  return out;
}

std::string limit_name(const std::string& full_key) {
  if (full_key.size() <= max_name_bytes) return full_key;
  std::uint64_t hash = 14'695'981'039'346'656'037ULL;
  for (const unsigned char c : full_key) {
    hash ^= c;
    hash *= 1'099'511'628'211ULL;
  }
  std::array<char, 17> hex{};
  std::snprintf(hex.data(), hex.size(), "%016llx", static_cast<unsigned long long>(hash));
  return full_key.substr(0, max_name_bytes - 17) + "~" + hex.data();
}

DomainConfig parse_domain(std::string_view text, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    throw ConfigFileError(file + ":" + std::to_string(e.mark.line + 1) + ": not YAML: " + e.msg);
  }
  return DomainReader(file).read(root);
}

std::vector<std::filesystem::path> config_files(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(path, error)) return {path};
  const auto unreadable = [](const fs::path& where, const std::error_code& why) {
    return ConfigFileError(where.string() + ": cannot be read: " + why.message());
  };
  std::vector<fs::path> files;
  // Why links to directories are followed: a ConfigMap's item with a path of its own is one.
  // Why each directory once: a link may lead back up the tree.
  std::set<fs::path> directories = {fs::canonical(path, error)};
  fs::recursive_directory_iterator entry(path, fs::directory_options::follow_directory_symlink,
                                         error);
  for (; !error && entry != fs::recursive_directory_iterator(); entry.increment(error)) {
    if (entry->path().filename().string().starts_with('.')) {
      entry.disable_recursion_pending();
      continue;
    }
    std::error_code status_error;
    const fs::file_status status = entry->status(status_error);
    if (status_error) throw unreadable(entry->path(), status_error);
    if (fs::is_directory(status)) {
      if (!directories.insert(fs::canonical(entry->path(), status_error)).second || status_error)
        entry.disable_recursion_pending();
    } else if (fs::is_regular_file(status)) {
      files.push_back(entry->path());
    }
  }
  if (error) throw unreadable(path, error);
  std::sort(files.begin(), files.end());
  return files;
}

RateLimitConfig load_config(const std::filesystem::path& path, bool merge_domains) {
  RateLimitConfig config;
  for (const auto& file : config_files(path)) {
    std::ifstream in(file);
    if (!in) throw ConfigFileError(file.string() + ": cannot be read");
    std::ostringstream text;
    text << in.rdbuf();
    DomainConfig domain = parse_domain(text.str(), file.string());
    const auto it = config.domains.find(domain.name);
    if (it == config.domains.end()) {
      std::string name = domain.name;
      config.domains.emplace(std::move(name), std::move(domain));
    } else if (merge_domains) {
      merge_into(it->second, std::move(domain));
    } else {
      throw ConfigFileError(to_string(domain.where) + ": domain '" + domain.name +
                            "' is also defined in " + it->second.where.file);
    }
  }
  return config;
}

}  // namespace redlimit_server
