#pragma once
/// @file callback.hpp
/// Callback style, for code without coroutines: start a Task on the loop and receive its value
/// or its error in a callback.

#include <uv.h>

#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/task.hpp"

namespace redlimit {

namespace detail {

/// What every Result has: the call's exception, if any.
class ResultError {
 public:
  /// True when the call ended normally.
  bool ok() const noexcept { return !error_; }
  /// The call's exception, or null.
  std::exception_ptr error() const noexcept { return error_; }
  /// What kind of error ended the call (ErrorKind::none when ok): tells Cancelled from
  /// Unavailable without a rethrow.
  ErrorKind error_kind() const noexcept { return kind_; }
  /// The call's error as an `E` (Cancelled, Unavailable, TimeoutError, ReplyError, Error, ...),
  /// or null when ok or when the error is not an `E`. Valid as long as this Result (or a copy of
  /// it) lives.
  template <class E>
  requires std::is_base_of_v<std::exception, E>
  const E* error_as() const noexcept {
    if (!error_) return nullptr;
    try {
      std::rethrow_exception(error_);
    } catch (const E& error) {
      return &error;  // the object error_ holds, not a copy
    } catch (...) {
      return nullptr;
    }
  }
  /// The exception's message (what()), or "" when ok.
  std::string error_message() const {
    if (!error_) return {};
    try {
      std::rethrow_exception(error_);
    } catch (const std::exception& e) {
      return e.what();
    } catch (...) {
      return "a non-standard exception";
    }
  }

 protected:
  ResultError() = default;
  // Why the kind is found here, once: error_kind() is asked without a rethrow.
  explicit ResultError(std::exception_ptr error)
      : error_(std::move(error)), kind_(error_kind_of(error_)) {}
  void rethrow_if_error() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::exception_ptr error_;
  ErrorKind kind_ = ErrorKind::none;
};

}  // namespace detail

/// The value of a finished call, or the exception it ended with (an Error subclass, see
/// errors.hpp).
template <class T>
class Result : public detail::ResultError {
 public:
  explicit Result(T value) : value_(std::move(value)) {}
  explicit Result(std::exception_ptr error) : ResultError(std::move(error)) {}
  /// The value; rethrows the call's exception if it has none.
  const T& value() const {
    rethrow_if_error();
    return *value_;
  }

 private:
  std::optional<T> value_;
};

/// A finished call without a value (close(), reset()), or the exception it ended with.
template <>
class Result<void> : public detail::ResultError {
 public:
  Result() = default;
  explicit Result(std::exception_ptr error) : ResultError(std::move(error)) {}
  /// Rethrows the call's exception, if any.
  void value() const { rethrow_if_error(); }
};

namespace detail {

template <class T, class Keep>
Task<void> deliver(Keep keep, Task<T> task, std::function<void(Result<T>)> done) {
  (void)keep;  // holds what `task` needs until `done` has run
  std::optional<Result<T>> result;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(task);
      result.emplace();
    } else {
      result.emplace(co_await std::move(task));
    }
  } catch (...) {
    result.emplace(std::current_exception());
  }
  done(std::move(*result));
}

}  // namespace detail

/// Starts `task` on the next iteration of `loop` and calls `done` with its result, from the
/// loop (never inline, never from another thread). `keep` (any copyable value, e.g. a
/// shared_ptr) lives until `done` has returned. An exception thrown by `done` goes to the error
/// handler (see set_error_handler). Call on the loop's thread.
template <class T, class Keep = std::nullptr_t>
void start(uv_loop_t* loop, Task<T> task, std::type_identity_t<std::function<void(Result<T>)>> done,
           Keep keep = {}) {
  spawn(loop, detail::deliver<T>(std::move(keep), std::move(task), std::move(done)));
}

}  // namespace redlimit
