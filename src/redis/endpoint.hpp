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

/// Parses `redis-cluster://[user[:password]@]host[:port][,host[:port]...]`: one Endpoint per
/// seed node, each with the credentials. A cluster has only database 0, so no /db part is
/// accepted. Throws ConfigError as parse_redis_url does.
std::vector<Endpoint> parse_cluster_url(std::string_view url);

}  // namespace redlimit::detail
