#include "redis/endpoint.hpp"

#include <charconv>

#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

[[noreturn]] void bad_url(const std::string& why) {
  throw ConfigError("invalid Redis URL: " + why);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view text, const char* field) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    const int high = i + 2 < text.size() ? hex_value(text[i + 1]) : -1;
    const int low = i + 2 < text.size() ? hex_value(text[i + 2]) : -1;
    if (high < 0 || low < 0) bad_url(std::string("bad percent-escape in the ") + field);
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

int parse_int(std::string_view text, int min, int max, const char* field) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || value < min ||
      value > max) {
    bad_url(std::string(field) + " must be an integer in [" + std::to_string(min) + ", " +
            std::to_string(max) + "], got '" + std::string(text) + "'");
  }
  return value;
}

/// Splits "user:password@rest" into the credentials and "rest".
std::string_view take_credentials(std::string_view rest, Endpoint& endpoint) {
  const auto at = rest.rfind('@');
  if (at == std::string_view::npos) return rest;
  const std::string_view credentials = rest.substr(0, at);
  const auto colon = credentials.find(':');
  if (colon == std::string_view::npos) {
    // "redis://secret@host" is the common form for a password without a user.
    endpoint.password = percent_decode(credentials, "password");
  } else {
    endpoint.user = percent_decode(credentials.substr(0, colon), "user name");
    endpoint.password = percent_decode(credentials.substr(colon + 1), "password");
  }
  if (endpoint.password.empty() && !endpoint.user.empty()) {
    bad_url("user '" + endpoint.user + "' given without a password");
  }
  return rest.substr(at + 1);
}

// Why credentials first: a password may contain '/', '?' or ':', and must never end up in
// the part of the URL that error messages quote.
void parse_tcp(std::string_view rest, Endpoint& endpoint) {
  rest = take_credentials(rest, endpoint);
  const auto slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) endpoint.db = parse_int(db, 0, 1'000'000, "the database number");
  }
  std::string_view host = authority;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {  // [::1]:6379
    const auto close = authority.find(']');
    if (close == std::string_view::npos) bad_url("unterminated IPv6 address");
    host = authority.substr(1, close - 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') bad_url("expected ':' after the IPv6 address");
      port = after.substr(1);
      if (port.empty()) bad_url("empty port");
    }
  } else if (const auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    if (port.empty()) bad_url("empty port");
    if (host.find(':') != std::string_view::npos)
      bad_url("':' in the host (an IPv6 address goes in brackets: [::1]:6379)");
  }
  if (host.empty()) bad_url("missing host");
  endpoint.host = std::string(host);
  endpoint.port = port.empty() ? 6379 : parse_int(port, 1, 65535, "the port");
}

void parse_unix(std::string_view rest, Endpoint& endpoint) {
  endpoint.transport = Endpoint::Transport::unix_socket;
  rest = take_credentials(rest, endpoint);
  const auto query = rest.find('?');
  const std::string_view path = rest.substr(0, query);
  if (query != std::string_view::npos) {
    const std::string_view parameter = rest.substr(query + 1);
    if (parameter.substr(0, 3) != "db=") bad_url("the only unix:// parameter is db=N");
    endpoint.db = parse_int(parameter.substr(3), 0, 1'000'000, "the database number");
  }
  if (path.empty() || path.front() != '/') bad_url("unix:// needs an absolute socket path");
  endpoint.path = std::string(path);
}

constexpr std::string_view cluster_scheme = "redis-cluster://";
constexpr std::string_view sentinel_scheme = "redis-sentinel://";
constexpr std::string_view tls_sentinel_scheme = "rediss-sentinel://";

}  // namespace

std::string Endpoint::display() const {
  std::string out = transport == Transport::unix_socket ? "unix://"
                    : tls                               ? "rediss://"
                                                        : "redis://";
  if (!user.empty()) out += user + "@";
  if (transport == Transport::tcp) {
    out += host.find(':') == std::string::npos ? host : "[" + host + "]";
    out += ":" + std::to_string(port);
    if (db != 0) out += "/" + std::to_string(db);
  } else {
    out += path;
    if (db != 0) out += "?db=" + std::to_string(db);
  }
  return out;
}

Endpoint parse_redis_url(std::string_view url) {
  Endpoint endpoint;
  constexpr std::string_view redis_scheme = "redis://";
  constexpr std::string_view tls_scheme = "rediss://";
  constexpr std::string_view unix_scheme = "unix://";
  if (url.substr(0, redis_scheme.size()) == redis_scheme) {
    parse_tcp(url.substr(redis_scheme.size()), endpoint);
  } else if (url.substr(0, tls_scheme.size()) == tls_scheme) {
    parse_tcp(url.substr(tls_scheme.size()), endpoint);
    endpoint.tls = true;
  } else if (url.substr(0, unix_scheme.size()) == unix_scheme) {
    parse_unix(url.substr(unix_scheme.size()), endpoint);
  } else {
    const auto scheme_end = url.find("://");
    bad_url(scheme_end == std::string_view::npos
                ? "expected redis://host[:port][/db], rediss://... or unix:///path"
                : "unsupported scheme '" + std::string(url.substr(0, scheme_end)) +
                      "' (supported: redis, rediss, unix, redis-cluster, redis-sentinel, "
                      "rediss-sentinel)");
  }
  return endpoint;
}

bool is_cluster_url(std::string_view url) noexcept {
  return url.substr(0, cluster_scheme.size()) == cluster_scheme;
}

bool is_sentinel_url(std::string_view url) noexcept {
  return url.starts_with(sentinel_scheme) || url.starts_with(tls_sentinel_scheme);
}

SentinelConfig parse_sentinel_url(std::string_view url) {
  if (!is_sentinel_url(url)) bad_url("expected redis-sentinel://host:port[,host:port...]#master");
  const bool tls = url.starts_with(tls_sentinel_scheme);
  std::string_view rest = url.substr(tls ? tls_sentinel_scheme.size() : sentinel_scheme.size());
  SentinelConfig config;
  config.primary.tls = tls;
  // Why the name first: it may hold an '@', which must not be read as credentials.
  const auto hash = rest.find('#');
  if (hash == std::string_view::npos || hash + 1 == rest.size()) {
    bad_url("a redis-sentinel:// URL names the monitored primary after '#' (e.g. #mymaster)");
  }
  config.master = percent_decode(rest.substr(hash + 1), "primary's name");
  rest = take_credentials(rest.substr(0, hash), config.primary);
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) config.primary.db = parse_int(db, 0, 1'000'000, "the database number");
    rest = rest.substr(0, slash);
  }
  for (;;) {
    const auto comma = rest.find(',');
    Endpoint sentinel;
    sentinel.tls = tls;
    sentinel.port = 26379;
    const std::string_view address = rest.substr(0, comma);
    // Why not parse_tcp's default port: a sentinel's is 26379.
    parse_tcp(address, sentinel);
    if (address.find(':') == std::string_view::npos ||
        (address.front() == '[' && address.find("]:") == std::string_view::npos)) {
      sentinel.port = 26379;
    }
    config.sentinels.push_back(std::move(sentinel));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return config;
}

std::vector<Endpoint> parse_cluster_url(std::string_view url) {
  if (!is_cluster_url(url)) bad_url("expected redis-cluster://host:port[,host:port...]");
  Endpoint credentials;
  std::string_view seeds = take_credentials(url.substr(cluster_scheme.size()), credentials);
  if (seeds.find('/') != std::string_view::npos) {
    bad_url("a cluster has only database 0: no /db part in redis-cluster:// URLs");
  }
  std::vector<Endpoint> endpoints;
  for (;;) {
    const auto comma = seeds.find(',');
    Endpoint seed = credentials;
    parse_tcp(seeds.substr(0, comma), seed);
    endpoints.push_back(std::move(seed));
    if (comma == std::string_view::npos) break;
    seeds.remove_prefix(comma + 1);
  }
  return endpoints;
}

}  // namespace redlimit::detail
