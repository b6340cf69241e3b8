#include "redis/tls_context.hpp"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdlib.h>

#include <filesystem>
#include <system_error>

#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

/// True for an IPv4 or IPv6 address in text form.
bool is_ip_address(const std::string& host) {
  unsigned char address[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), address) == 1 ||
         inet_pton(AF_INET6, host.c_str(), address) == 1;
}

[[noreturn]] void config_error(const std::string& what) {
  throw ConfigError("TLS: " + openssl_errors(what) + " (" + what + ")");
}

}  // namespace

std::string openssl_errors(const std::string& fallback) {
  std::string text;
  while (const unsigned long code = ERR_get_error()) {
    char buffer[256];
    ERR_error_string_n(code, buffer, sizeof buffer);
    if (!text.empty()) text += "; ";
    text += buffer;
  }
  return text.empty() ? fallback : text;
}

TlsContext::TlsContext(const TlsOptions& options)
    : context_(SSL_CTX_new(TLS_client_method())),
      server_name_(options.server_name),
      verify_peer_(options.verify_peer) {
  if (context_ == nullptr) config_error("cannot create an OpenSSL context");
  // Why the destructor's work by hand: a constructor that throws runs no destructor.
  try {
    if (SSL_CTX_set_min_proto_version(context_, TLS1_2_VERSION) != 1) {
      config_error("cannot require TLS 1.2 or newer");
    }
    if (!options.ca_file.empty()) {
      if (SSL_CTX_load_verify_locations(context_, options.ca_file.c_str(), nullptr) != 1) {
        config_error("cannot load the CA file '" + options.ca_file + "'");
      }
    } else if (SSL_CTX_set_default_verify_paths(context_) != 1) {
      config_error("cannot load the system's CA certificates");
    }
    if (options.cert_file.empty() != options.key_file.empty()) {
      throw ConfigError("TLS: TlsOptions::cert_file and key_file go together (got only the " +
                        std::string(options.cert_file.empty() ? "key" : "certificate") + ")");
    }
    if (!options.cert_file.empty()) {
      if (SSL_CTX_use_certificate_chain_file(context_, options.cert_file.c_str()) != 1) {
        config_error("cannot load the certificate file '" + options.cert_file + "'");
      }
      if (SSL_CTX_use_PrivateKey_file(context_, options.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
        config_error("cannot load the key file '" + options.key_file + "'");
      }
      if (SSL_CTX_check_private_key(context_) != 1) {
        config_error("the key in '" + options.key_file + "' does not match the certificate in '" +
                     options.cert_file + "'");
      }
    }
    SSL_CTX_set_verify(context_, verify_peer_ ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
    // Why: what loading left in the thread's error queue would be read as a later failure.
    ERR_clear_error();
  } catch (...) {
    SSL_CTX_free(context_);
    throw;
  }
}

TlsContext::~TlsContext() {
  SSL_CTX_free(context_);
  if (!directory_.empty()) {
    std::error_code ignored;  // a tunnel's path is unlinked by the tunnel; nothing else is there
    std::filesystem::remove_all(directory_, ignored);
  }
}

std::string TlsContext::new_socket_path() {
  // Why checked each time: a cleaner of old files in /tmp may remove an empty directory.
  std::error_code error;
  if (directory_.empty() || !std::filesystem::is_directory(directory_, error)) {
    std::filesystem::path base = std::filesystem::temp_directory_path(error);
    // Why /tmp for a long $TMPDIR: a unix socket's path has room for 107 bytes.
    if (error || base.string().size() > 64) base = "/tmp";
    std::string pattern = (base / "redlimit-tls-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw ConnectionError("TLS: cannot make a private directory for hiredis's sockets under " +
                            base.string());
    }
    directory_ = pattern;
  }
  return directory_ + "/" + std::to_string(++sockets_made_);
}

SSL* TlsContext::new_session(const std::string& host) const {
  SSL* session = SSL_new(context_);
  if (session == nullptr) throw TlsError("TLS: " + openssl_errors("cannot create a session"));
  const std::string& name = server_name_.empty() ? host : server_name_;
  bool named = true;
  if (is_ip_address(name)) {
    // Why no SNI for an address: RFC 6066 allows host names only.
    if (verify_peer_) {
      named = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(session), name.c_str()) == 1;
    }
  } else {
    named = SSL_set_tlsext_host_name(session, name.c_str()) == 1 &&
            (!verify_peer_ || SSL_set1_host(session, name.c_str()) == 1);
    SSL_set_hostflags(session, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  }
  if (!named) {
    SSL_free(session);
    throw TlsError("TLS: " + openssl_errors("cannot set the server name '" + name + "'"));
  }
  SSL_set_connect_state(session);
  return session;
}

}  // namespace redlimit::detail
