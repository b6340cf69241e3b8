#include "support/test_certificates.hpp"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <memory>
#include <stdexcept>

namespace redlimit::test {
namespace {

struct KeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct CertificateDeleter {
  void operator()(X509* certificate) const { X509_free(certificate); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyDeleter>;
using Certificate = std::unique_ptr<X509, CertificateDeleter>;

constexpr long day = 24 * 60 * 60;

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("test certificates: ") + what + " failed");
}

Key new_key() {
  Key key(EVP_EC_gen("P-256"));
  check(key != nullptr, "EVP_EC_gen");
  return key;
}

/// Adds the extension `name` = `value`, as `openssl x509 -extfile` would read it.
void add_extension(X509* certificate, X509* issuer, int name, const char* value) {
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, issuer, certificate, nullptr, nullptr, 0);
  X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &context, name, value);
  check(extension != nullptr, "X509V3_EXT_conf_nid");
  check(X509_add_ext(certificate, extension, -1) == 1, "X509_add_ext");
  X509_EXTENSION_free(extension);
}

/// A certificate of `key` named `common_name`, valid from `from` to `to` seconds from now,
/// signed by `issuer_key` (with `issuer` as its issuer; itself when null).
Certificate new_certificate(EVP_PKEY* key, const char* common_name, long from, long to,
                            X509* issuer, EVP_PKEY* issuer_key, long serial) {
  Certificate certificate(X509_new());
  check(certificate != nullptr, "X509_new");
  X509* cert = certificate.get();
  check(X509_set_version(cert, 2) == 1, "X509_set_version");
  check(ASN1_INTEGER_set(X509_get_serialNumber(cert), serial) == 1, "serial");
  check(X509_gmtime_adj(X509_getm_notBefore(cert), from) != nullptr, "notBefore");
  check(X509_gmtime_adj(X509_getm_notAfter(cert), to) != nullptr, "notAfter");
  check(X509_set_pubkey(cert, key) == 1, "X509_set_pubkey");
  X509_NAME* name = X509_get_subject_name(cert);
  check(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                   reinterpret_cast<const unsigned char*>(common_name), -1, -1,
                                   0) == 1,
        "subject");
  X509* signer = issuer != nullptr ? issuer : cert;
  check(X509_set_issuer_name(cert, X509_get_subject_name(signer)) == 1, "issuer");
  if (issuer == nullptr) {
    add_extension(cert, signer, NID_basic_constraints, "critical,CA:TRUE");
    add_extension(cert, signer, NID_key_usage, "critical,keyCertSign,cRLSign");
    add_extension(cert, signer, NID_subject_key_identifier, "hash");
  } else {
    add_extension(cert, signer, NID_basic_constraints, "critical,CA:FALSE");
    add_extension(cert, signer, NID_authority_key_identifier, "keyid");
  }
  check(X509_sign(cert, issuer_key, EVP_sha256()) > 0, "X509_sign");
  return certificate;
}

void write_certificate(const std::string& path, X509* certificate) {
  FILE* file = std::fopen(path.c_str(), "w");
  check(file != nullptr, "fopen");
  const bool written = PEM_write_X509(file, certificate) == 1;
  std::fclose(file);
  check(written, "PEM_write_X509");
}

void write_key(const std::string& path, EVP_PKEY* key) {
  FILE* file = std::fopen(path.c_str(), "w");
  check(file != nullptr, "fopen");
  const bool written = PEM_write_PrivateKey(file, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
  std::fclose(file);
  check(written, "PEM_write_PrivateKey");
}

}  // namespace

TestCertificates::TestCertificates(const std::string& directory) {
  const Key ca_key = new_key();
  const Certificate ca_cert =
      new_certificate(ca_key.get(), "redlimit test CA", -day, 365 * day, nullptr, ca_key.get(), 1);
  const Key other_key = new_key();
  const Certificate other_cert =
      new_certificate(other_key.get(), "another CA", -day, 365 * day, nullptr, other_key.get(), 1);
  ca = directory + "/ca.pem";
  other_ca = directory + "/other-ca.pem";
  write_certificate(ca, ca_cert.get());
  write_certificate(other_ca, other_cert.get());

  const auto issue = [&](const char* name, const char* names, long from, long to, long serial,
                         const char* extended_usage) {
    const Key key = new_key();
    const Certificate cert =
        new_certificate(key.get(), name, from, to, ca_cert.get(), ca_key.get(), serial);
    if (names != nullptr) add_extension(cert.get(), ca_cert.get(), NID_subject_alt_name, names);
    add_extension(cert.get(), ca_cert.get(), NID_ext_key_usage, extended_usage);
    // Why signed again: the extensions added after the first signature are part of it.
    check(X509_sign(cert.get(), ca_key.get(), EVP_sha256()) > 0, "X509_sign");
    const std::string base = directory + "/" + std::to_string(serial);
    write_certificate(base + ".pem", cert.get());
    write_key(base + ".key", key.get());
    return CertificateFiles{base + ".pem", base + ".key"};
  };
  const char* server_names = "DNS:redis.test,IP:127.0.0.1";
  server = issue("redis.test", server_names, -day, 365 * day, 2, "serverAuth");
  expired_server = issue("redis.test", server_names, -30 * day, -day, 3, "serverAuth");
  client = issue("redlimit-client", nullptr, -day, 365 * day, 4, "clientAuth");
}

}  // namespace redlimit::test
