#pragma once

#include <exception>

#include "redlimit/task.hpp"

namespace redlimit::detail {

/// A task that rethrows `error` when awaited: how a function that returns a Task without being a
/// coroutine reports an error the way a coroutine would, at the caller's co_await.
template <class T>
Task<T> failed_task(std::exception_ptr error) {
  // Why a coroutine that only throws: the exception must reach the awaiter, not the caller.
  co_await std::suspend_never{};
  std::rethrow_exception(error);
}

}  // namespace redlimit::detail
