#pragma once
// The exit statuses of the redlimit command, and the error that carries one.

#include <stdexcept>
#include <string>

namespace redlimit_cli {

/// What the command's exit status means (docs/operations.md, "The redlimit command").
enum ExitStatus : int {
  exit_ok = 0,
  /// Not found or denied: nothing stored under the name, a try-set that did not store, an
  /// inspected key whose next one-permit request would be denied.
  exit_not_found = 1,
  /// Bad arguments: the command line, a policy's text or values, a malformed URL.
  exit_usage = 2,
  /// Redis did not answer, or refused the credentials.
  exit_unavailable = 3,
  /// Anything else (Redis answered with an error, a reply the command did not expect).
  exit_failed = 4,
};

/// An error a command raises on purpose: its message is printed, and the command exits with
/// `status`.
class CommandError : public std::runtime_error {
 public:
  CommandError(ExitStatus status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  ExitStatus status() const noexcept { return status_; }

 private:
  ExitStatus status_;
};

}  // namespace redlimit_cli
