#pragma once

#include <openssl/ssl.h>

#include <cstdint>
#include <memory>
#include <string>

#include "redlimit/client.hpp"

namespace redlimit::detail {

/// One client's TLS configuration, loaded once: an OpenSSL SSL_CTX with the CA, the client's
/// certificate and key, and the verification mode of its TlsOptions (unchanged once made), and
/// the private directory of its tunnels' sockets. Shared by every TLS connection of the client.
class TlsContext {
 public:
  /// Loads `options`' files. Throws ConfigError naming the file and OpenSSL's reason when one
  /// cannot be read, or when the key does not match the certificate.
  explicit TlsContext(const TlsOptions& options);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  /// A new connection's SSL object, set to verify `host` (the URL's host) or the configured
  /// server name, in client mode. Its BIOs are the caller's to set. Throws TlsError.
  SSL* new_session(const std::string& host) const;
  /// Whether the server's certificate is verified (TlsOptions::verify_peer).
  bool verify_peer() const noexcept { return verify_peer_; }
  /// A new path for a TlsTunnel's unix socket, in a directory made for this context (mode
  /// 0700: only this user may connect) under $TMPDIR or /tmp. Throws ConnectionError when the
  /// directory cannot be made.
  std::string new_socket_path();

 private:
  SSL_CTX* context_;  ///< owned; SSL_CTX_free in the destructor
  std::string server_name_;
  bool verify_peer_;
  std::string directory_;  ///< made by the first new_socket_path(); removed in the destructor
  std::uint64_t sockets_made_ = 0;
};

/// The text of OpenSSL's queued errors (and clears them), or `fallback` when none is queued.
std::string openssl_errors(const std::string& fallback);

}  // namespace redlimit::detail
