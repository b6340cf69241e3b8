#pragma once

#include <coroutine>
#include <exception>
#include <vector>

#include "redlimit/task.hpp"

namespace redlimit::detail {

/// `co_await Together(std::move(tasks))`: starts every task at once (each runs until its first
/// suspension, in order) and resumes when all have ended; then rethrows the first error a task
/// let escape. Calls that go out in one loop iteration coalesce (BatchingExecutor), so the
/// parts of one call on one server cost one script call, not one round trip each.
///
/// Why not a TaskGroup: destroying the awaiting coroutine destroys the tasks still running with
/// it (each as if its own caller had been destroyed), so none outlives the frame whose state it
/// uses. Non-copyable, non-movable: await it as a temporary.
class Together {
 public:
  explicit Together(std::vector<Task<void>> tasks);
  Together(const Together&) = delete;
  Together& operator=(const Together&) = delete;
  ~Together();

  bool await_ready() const noexcept { return children_.empty(); }
  bool await_suspend(std::coroutine_handle<> parent);
  void await_resume() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  struct Child;
  static Child run_child(Task<void> task, std::exception_ptr* error);

  std::vector<std::coroutine_handle<>> children_;
  std::coroutine_handle<> parent_;
  std::size_t running_ = 0;
  std::exception_ptr error_;
};

}  // namespace redlimit::detail
