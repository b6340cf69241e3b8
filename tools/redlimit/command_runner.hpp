#pragma once
// Running one command: the client it talks to Redis with, and what its errors become.

#include <functional>
#include <stop_token>
#include <string>

#include "redlimit/client.hpp"
#include "redlimit/task.hpp"

namespace redlimit_cli {

/// The options every command takes.
struct GlobalOptions {
  /// The Redis to talk to (--url, else $REDLIMIT_URL).
  std::string url = "redis://127.0.0.1:6379";
  /// The key prefix of the limiters and policies (LimiterOptions::prefix).
  std::string prefix = "rl";
  /// One JSON document (watch: one per line) instead of tables.
  bool json = false;
  /// For a rediss:// URL: the CA file, and a client certificate and key (--tls-ca, --tls-cert,
  /// --tls-key); empty: the system's CAs, no client certificate.
  redlimit::TlsOptions tls{};
  /// For a redis-sentinel:// URL: the sentinels' own password (--sentinel-password, else
  /// $REDLIMIT_SENTINEL_PASSWORD); never printed.
  std::string sentinel_password{};
  /// For a scope per_client policy: the client whose state inspect and reset read
  /// (--client-id, its ClientOptions::id).
  std::string client_id{};
};

/// A command's work on a connected client; returns the exit status (see ExitStatus). `stop` is
/// requested by SIGINT or SIGTERM.
using CommandBody = std::function<redlimit::Task<int>(redlimit::Client&, std::stop_token)>;

/// Runs `body` with a client of options.url, then closes it; returns the exit status. An error
/// that escapes `body` is printed on stderr, without the URL's password, and becomes a status:
/// InvalidArgument 2, PolicyNotFound 1, Unavailable and ConfigError (credentials) 3, a malformed
/// URL 2, a CommandError its own, anything else 4.
int run_command(const GlobalOptions& options, CommandBody body);

}  // namespace redlimit_cli
