#pragma once

#include <coroutine>
#include <utility>
#include <vector>

namespace redlimit::detail {

/// A one-shot event that any number of coroutines can wait for: `co_await done.wait()`. set()
/// resumes them in order, inline; call it as the last thing its caller does, because a resumed
/// waiter may destroy the object that owns the event.
class Completion {
 public:
  bool done() const noexcept { return done_; }

  void set() {
    done_ = true;
    for (auto waiter : std::exchange(waiters_, {}))
      waiter.resume();
  }

  auto wait() noexcept {
    struct Awaiter {
      Completion& completion;
      bool await_ready() const noexcept { return completion.done_; }
      void await_suspend(std::coroutine_handle<> waiter) { completion.waiters_.push_back(waiter); }
      void await_resume() const noexcept {}
    };
    return Awaiter{*this};
  }

 private:
  bool done_ = false;
  std::vector<std::coroutine_handle<>> waiters_;
};

}  // namespace redlimit::detail
