#pragma once

#include <coroutine>
#include <utility>

#include "redlimit/runtime.hpp"

namespace redlimit::detail {

/// Counts the uv handles an object has open and lets one coroutine wait until all are closed.
class CloseLatch {
 public:
  void opened() noexcept { ++open_; }
  /// Called from a handle's close callback; resumes the waiter when the last one closed.
  void closed() noexcept {
    if (--open_ == 0) {
      if (auto waiter = std::exchange(waiter_, {})) {
        LoopScope scope;
        waiter.resume();
      }
    }
  }
  int open() const noexcept { return open_; }

  /// `co_await latch.all_closed()`: resumes once every handle has run its close callback.
  auto all_closed() noexcept {
    struct Awaiter {
      CloseLatch& latch;
      bool await_ready() const noexcept { return latch.open_ == 0; }
      void await_suspend(std::coroutine_handle<> waiter) noexcept { latch.waiter_ = waiter; }
      void await_resume() const noexcept {}
    };
    return Awaiter{*this};
  }

 private:
  int open_ = 0;
  std::coroutine_handle<> waiter_;
};

}  // namespace redlimit::detail
