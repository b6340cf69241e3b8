#include "runtime/together.hpp"

namespace redlimit::detail {

/// One task, run as a child that tells its Together when it ends.
struct Together::Child {
  struct promise_type {
    Together* owner = nullptr;

    Child get_return_object() noexcept {
      return Child{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }
    struct Ended {
      bool await_ready() const noexcept { return false; }
      // Why the parent is resumed only when the count reaches 0: await_suspend() holds one
      // count until every child was started, so a child that ends at once returns to it.
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> self) noexcept {
        Together& owner = *self.promise().owner;
        if (--owner.running_ == 0) return owner.parent_;
        return std::noop_coroutine();
      }
      void await_resume() const noexcept {}
    };
    Ended final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() const noexcept { std::terminate(); }  // run_child() catches
  };

  std::coroutine_handle<promise_type> handle;
};

Together::Child Together::run_child(Task<void> task, std::exception_ptr* error) {
  try {
    co_await std::move(task);
  } catch (...) {
    if (!*error) *error = std::current_exception();
  }
}

Together::Together(std::vector<Task<void>> tasks) {
  children_.reserve(tasks.size());
  for (Task<void>& task : tasks) {
    const Child child = run_child(std::move(task), &error_);
    child.handle.promise().owner = this;
    children_.push_back(child.handle);
  }
}

Together::~Together() {
  for (const std::coroutine_handle<> child : children_)
    child.destroy();
}

bool Together::await_suspend(std::coroutine_handle<> parent) {
  parent_ = parent;
  running_ = children_.size() + 1;
  for (const std::coroutine_handle<> child : children_)
    child.resume();
  return --running_ != 0;
}

}  // namespace redlimit::detail
