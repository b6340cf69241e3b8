#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace redlimit::detail {

/// Where one Redis server is and how to log in to it.
struct Endpoint {
  enum class Transport { tcp, unix_socket };
  Transport transport = Transport::tcp;
  std::string host = "127.0.0.1";  ///< tcp
  int port = 6379;                 ///< tcp
  std::string path;                ///< unix_socket
  std::string user;                ///< empty: the default user (AUTH <password>)
  std::string password;            ///< empty: no AUTH
  int db = 0;                      ///< SELECT when not 0
  bool tls = false;                ///< tcp: TLS to the server (rediss://)

  /// "redis://user@host:port/db", "rediss://..." or "unix:///path": never the password.
  std::string display() const;
};

/// Parses `redis://[user[:password]@]host[:port][/db]`, the same with `rediss://` (TLS), and
/// `unix://[user[:password]@]/path[?db=N]`; throws ConfigError naming what is wrong (never
/// quoting the password).
Endpoint parse_redis_url(std::string_view url);

/// True when `url` names a Redis Cluster (`redis-cluster://`).
bool is_cluster_url(std::string_view url) noexcept;

/// A primary found through Redis Sentinel.
struct SentinelConfig {
  /// The sentinels to ask, in order (port 26379 unless given); their credentials are the
  /// client's sentinel_user and sentinel_password, their TLS the primary's.
  std::vector<Endpoint> sentinels;
  /// The name the sentinels monitor the primary under.
  std::string master;
  /// The primary as the client logs in to it: credentials, database and TLS; its host and port
  /// are what the sentinels say.
  Endpoint primary;
};

/// True when `url` names a primary through Sentinel (`redis-sentinel://`, `rediss-sentinel://`).
bool is_sentinel_url(std::string_view url) noexcept;

/// Parses `redis-sentinel://[user[:password]@]host[:port][,host[:port]...][/db]#master` (Lettuce's
/// form; `rediss-sentinel://` for TLS to the sentinels and the primary). The credentials are the
/// primary's. Throws ConfigError as parse_redis_url does.
SentinelConfig parse_sentinel_url(std::string_view url);

/// Parses `redis-cluster://[user[:password]@]host[:port][,host[:port]...]`: one Endpoint per
/// seed node, each with the credentials. A cluster has only database 0, so no /db part is
/// accepted. Throws ConfigError as parse_redis_url does.
std::vector<Endpoint> parse_cluster_url(std::string_view url);

}  // namespace redlimit::detail
