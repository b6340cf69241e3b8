#pragma once

#include <memory>
#include <string>
#include <vector>

#include "support/redis_server.hpp"
#include "support/test_certificates.hpp"

namespace redlimit::test {

/// A private redis-server that serves TLS only (`--port 0 --tls-port`), with certificates made
/// for the test (TestCertificates). Its RedisServer's own commands go over the unix socket.
class TlsRedisServer {
 public:
  struct Options {
    /// Present the expired server certificate.
    bool expired_certificate = false;
    /// Require a client certificate signed by the test CA (`tls-auth-clients yes`).
    bool require_client_certificate = false;
    /// Extra redis-server arguments (e.g. {"--requirepass", "secret"}).
    std::vector<std::string> extra_args{};
  };

  TlsRedisServer() : TlsRedisServer(Options{}) {}
  explicit TlsRedisServer(Options options);
  ~TlsRedisServer();
  TlsRedisServer(const TlsRedisServer&) = delete;
  TlsRedisServer& operator=(const TlsRedisServer&) = delete;

  /// "rediss://127.0.0.1:<TLS port>"
  std::string url() const;
  int tls_port() const { return tls_port_; }
  const TestCertificates& certificates() const { return *certificates_; }
  RedisServer& server() { return *server_; }

 private:
  std::string directory_;
  int tls_port_;
  std::unique_ptr<TestCertificates> certificates_;
  std::unique_ptr<RedisServer> server_;
};

}  // namespace redlimit::test
