#pragma once

#include <string>

namespace redlimit::test {

/// A certificate and its private key, as PEM files.
struct CertificateFiles {
  std::string cert;
  std::string key;
};

/// A small public-key infrastructure for TLS tests, written as PEM files into a directory:
/// a CA, certificates it signed (for the server, valid and expired; for a client), and a
/// second CA that signed nothing of these. Keys are P-256.
struct TestCertificates {
  /// Makes every file in `directory` (which must exist).
  explicit TestCertificates(const std::string& directory);

  /// The CA's certificate (the file a verifying side trusts).
  std::string ca;
  /// Another CA's certificate: trusting it alone, nothing here verifies.
  std::string other_ca;
  /// The server's: names "redis.test" and 127.0.0.1, valid from a day ago for a year.
  CertificateFiles server;
  /// The server's with the same names, expired a day ago.
  CertificateFiles expired_server;
  /// A client's, for mutual TLS (CN "redlimit-client").
  CertificateFiles client;
};

}  // namespace redlimit::test
