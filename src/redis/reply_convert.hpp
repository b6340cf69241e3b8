#pragma once

#include <exception>
#include <string>
#include <string_view>

namespace redlimit::detail {

/// The first word of a Redis error message: "NOSCRIPT", "MOVED", "ERR", ...
std::string error_code(std::string_view message);

/// What a Redis error reply means to the client. The one classification the connection setup,
/// the cluster's redirects and retries, the script fallback, the circuit breaker and the
/// limiter's failure policy all use.
enum class ErrorReplyKind {
  redirect,        ///< MOVED, ASK: another node serves the slot
  retry_soon,      ///< TRYAGAIN, CLUSTERDOWN, LOADING, MASTERDOWN: nothing ran; the same
                   ///< command may succeed after a pause of milliseconds
  stale_primary,   ///< READONLY: a write reached a node that is no longer a primary
  server_busy,     ///< BUSY, OOM, NOREPLICAS, "ERR max number of clients reached" (at the
                   ///< handshake): the server is up but cannot serve the command now, for
                   ///< longer than a call's deadline as a rule
  permission,      ///< NOPERM, NOAUTH, WRONGPASS, or a script command the ACL user may not run
  script_missing,  ///< NOSCRIPT: the server does not have the script (EVAL it)
  other,           ///< the command itself was refused (ERR, WRONGTYPE, a script's error)
};

/// The kind of the error reply `message` (the whole message: a permission refusal inside a
/// script is an ERR whose text says so).
ErrorReplyKind classify_error_reply(std::string_view message);

/// True for the kinds that mean the server cannot serve now but may soon (retry_soon,
/// stale_primary, server_busy): the server counts as unavailable, not the command as wrong.
constexpr bool is_transient(ErrorReplyKind kind) noexcept {
  return kind == ErrorReplyKind::retry_soon || kind == ErrorReplyKind::stale_primary ||
         kind == ErrorReplyKind::server_busy;
}

/// True for replies that mean the caller lacks a permission or credentials: NOPERM, NOAUTH,
/// WRONGPASS, and a command inside a script that the ACL user may not run.
bool is_permission_error(std::string_view message);

/// The exception an error reply becomes: ConfigError for permission errors (with `hint`
/// appended), ReplyError carrying the code otherwise.
std::exception_ptr exception_from_error(std::string_view message, std::string_view hint = {});

/// True when `error` means Redis could not serve the call (the failure policy applies, the
/// circuit breaker counts it): an Unavailable (ConnectionError, TimeoutError, Overloaded,
/// CircuitOpen), a ReplyError of a transient kind, or a redirect a call ended on (it never
/// reached the node that serves its slot). Anything else (bad arguments,
/// permissions, protocol errors) is the caller's to see.
bool means_unavailable(const std::exception_ptr& error);

/// The message of `error` (its what()), for logs and for errors that wrap another.
std::string describe(const std::exception_ptr& error);

}  // namespace redlimit::detail
