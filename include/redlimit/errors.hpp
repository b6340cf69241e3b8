#pragma once
/// @file errors.hpp
/// Every error redlimit raises derives from redlimit::Error.

#include <chrono>
#include <exception>
#include <stdexcept>
#include <string>

namespace redlimit {

/// Base of every redlimit error.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A call's arguments are out of range; raised before any I/O. The message names the field and
/// the accepted range.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

/// Limiter::refund(), penalize() or block() cannot apply to a key, and nothing was changed: a
/// limit's algorithm cannot do it (block() under fixed_window or sliding_window_counter, or
/// under sliding_window_log for longer than its window; raised before any I/O, or for a
/// limiter that follows a PolicyStore once it has read the key's policy), or the key's
/// state does not hold what a refund gives back (a window algorithm's current window holds
/// fewer permits than refunded: a past window's permits cannot be given back). The message
/// names the limit.
class AdjustmentRefused : public Error {
 public:
  using Error::Error;
};

/// The configuration cannot work: a malformed URL, a wrong password, a missing ACL permission,
/// a database index the server does not have. Retrying does not help until it is fixed.
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// The library was used against its rules: `run()` from inside the loop, a call on a closed
/// client, a client used from another thread.
class UsageError : public Error {
 public:
  using Error::Error;
};

/// Redis could not answer this call: the base of ConnectionError, TimeoutError, Overloaded and
/// CircuitOpen.
class Unavailable : public Error {
 public:
  Unavailable(const std::string& what, bool maybe_executed)
      : Error(what), maybe_executed_(maybe_executed) {}
  /// True when the command had been sent: it may or may not have run on the server
  /// (indeterminate). False when it certainly never reached Redis, so retrying is safe.
  bool maybe_executed() const noexcept { return maybe_executed_; }

 private:
  bool maybe_executed_;
};

/// The connection was refused, reset or closed, or is not established (see maybe_executed()).
class ConnectionError : public Unavailable {
 public:
  explicit ConnectionError(const std::string& what, bool maybe_executed = false)
      : Unavailable(what, maybe_executed) {}
};

/// The call's deadline passed before Redis answered.
class TimeoutError : public Unavailable {
 public:
  explicit TimeoutError(const std::string& what, bool maybe_executed = false)
      : Unavailable(what, maybe_executed) {}
};

/// Too many commands are outstanding (`ClientOptions::max_pending`); nothing was sent.
class Overloaded : public Unavailable {
 public:
  explicit Overloaded(const std::string& what) : Unavailable(what, false) {}
};

/// The client's circuit breaker for the server is open: its recent calls failed, so script calls
/// to it fail at once for a while instead of each waiting for its deadline. Raised instead of
/// the call's own error by a failure that leaves the breaker open (what() names that error and
/// maybe_executed() is its), and with maybe_executed() false by calls the open breaker kept
/// from being sent.
class CircuitOpen : public Unavailable {
 public:
  CircuitOpen(const std::string& what, std::chrono::microseconds retry_after,
              bool maybe_executed = false)
      : Unavailable(what, maybe_executed), retry_after_(retry_after) {}
  /// How long from the error until the breaker lets a call reach the server again (it then
  /// sends one call as a probe; the others keep failing until the probe succeeds).
  std::chrono::microseconds retry_after() const noexcept { return retry_after_; }

 private:
  std::chrono::microseconds retry_after_;
};

/// The operation was cancelled through its stop token (or its owner went away).
class Cancelled : public Error {
 public:
  Cancelled() : Error("cancelled") {}
  using Error::Error;
};

/// A lease was used after it expired (Lease::renew()); its permits may already be held by others.
class LeaseExpired : public Error {
 public:
  using Error::Error;
};

/// A limiter that follows a PolicyStore found no policy stored under its name (nor an override
/// for the key) by the call's deadline: nothing was decided, and nothing is allowed. The same
/// limiter works once a policy is stored.
class PolicyNotFound : public Error {
 public:
  /// `store_read`: the store answered, and holds no policy under the name (nor an override for
  /// the key); false: it could not be read yet (Redis has not answered since the limiter began).
  explicit PolicyNotFound(const std::string& what, bool store_read = true)
      : Error(what), store_read_(store_read) {}
  /// Whether the store answered that it holds no policy, rather than not answering at all.
  bool store_read() const noexcept { return store_read_; }

 private:
  bool store_read_;
};

/// Redis answered with an error reply. code() is its first word: "ERR", "NOSCRIPT", "MOVED",
/// "BUSY", "OOM", "READONLY", ...
class ReplyError : public Error {
 public:
  ReplyError(std::string code, const std::string& message)
      : Error(message), code_(std::move(code)) {}
  const std::string& code() const noexcept { return code_; }

 private:
  std::string code_;
};

/// Redis answered with something the protocol or the script contract does not allow.
class ProtocolError : public Error {
 public:
  using Error::Error;
};

/// The TLS handshake with the server failed for a reason retrying does not fix: its
/// certificate did not verify (unknown CA, expired, another name), it refused this client's
/// (mutual TLS), or it does not speak TLS on that port. The message says which.
class TlsError : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

/// What kind of error ended a call, coarsely: the classes above, with every Unavailable subclass
/// (ConnectionError, TimeoutError, Overloaded, CircuitOpen) as `unavailable` and TlsError as
/// `config`. `none` when there is no error; `other` for an exception that is not a
/// redlimit::Error (e.g. std::bad_alloc, or one a callback of yours threw).
enum class ErrorKind {
  none,
  invalid_argument,
  adjustment_refused,
  config,
  usage,
  unavailable,
  cancelled,
  lease_expired,
  policy_not_found,
  reply,
  protocol,
  other,
};

/// The kind of `error`: `none` when null.
inline ErrorKind error_kind_of(const std::exception_ptr& error) noexcept {
  if (!error) return ErrorKind::none;
  // Why a rethrow: the handlers below pick the most specific kind the way a caller's would,
  // and none of them needs a cast.
  try {
    std::rethrow_exception(error);
  } catch (const Unavailable&) {
    return ErrorKind::unavailable;
  } catch (const Cancelled&) {
    return ErrorKind::cancelled;
  } catch (const InvalidArgument&) {
    return ErrorKind::invalid_argument;
  } catch (const AdjustmentRefused&) {
    return ErrorKind::adjustment_refused;
  } catch (const ConfigError&) {
    return ErrorKind::config;
  } catch (const UsageError&) {
    return ErrorKind::usage;
  } catch (const LeaseExpired&) {
    return ErrorKind::lease_expired;
  } catch (const PolicyNotFound&) {
    return ErrorKind::policy_not_found;
  } catch (const ReplyError&) {
    return ErrorKind::reply;
  } catch (const ProtocolError&) {
    return ErrorKind::protocol;
  } catch (...) {
    return ErrorKind::other;
  }
}

}  // namespace redlimit
