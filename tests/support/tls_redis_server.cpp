#include "support/tls_redis_server.hpp"

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>

namespace redlimit::test {

TlsRedisServer::TlsRedisServer(Options options) : tls_port_(free_port()) {
  std::string pattern = (std::filesystem::temp_directory_path() / "redlimit-pki-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  directory_ = pattern;
  certificates_ = std::make_unique<TestCertificates>(directory_);
  const CertificateFiles& served =
      options.expired_certificate ? certificates_->expired_server : certificates_->server;
  std::vector<std::string> args{"--port",
                                "0",
                                "--tls-port",
                                std::to_string(tls_port_),
                                "--tls-cert-file",
                                served.cert,
                                "--tls-key-file",
                                served.key,
                                "--tls-ca-cert-file",
                                certificates_->ca,
                                "--tls-auth-clients",
                                options.require_client_certificate ? "yes" : "no"};
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  server_ = std::make_unique<RedisServer>(std::move(args));
}

TlsRedisServer::~TlsRedisServer() {
  server_.reset();
  std::error_code ignored;
  std::filesystem::remove_all(directory_, ignored);
}

std::string TlsRedisServer::url() const {
  return "rediss://127.0.0.1:" + std::to_string(tls_port_);
}

}  // namespace redlimit::test
