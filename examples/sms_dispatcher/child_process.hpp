#pragma once
// A child process on the loop: started with uv_spawn, its stdout read line by line (or
// discarded), its exit awaitable from a coroutine, stopped by its own PID.

#include <uv.h>

#include <coroutine>
#include <functional>
#include <string>
#include <vector>

/// One child process. Use on the loop's thread; keep it alive until exited() has resumed.
class ChildProcess {
 public:
  /// Starts `args[0]` (searched in PATH) with `args`. When `on_line` is set, every line the
  /// child writes on stdout goes to it; otherwise stdout is discarded. stderr is inherited.
  /// Throws std::runtime_error when the program cannot be started.
  ChildProcess(uv_loop_t* loop, const std::vector<std::string>& args,
               std::function<void(const std::string&)> on_line = {});
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  /// The uv handles, on the heap: they outlive the object until their close callbacks.
  struct Handles;

  /// True until the child has exited.
  bool running() const noexcept { return exit_status_ < 0; }
  /// Sends `signal` to the child, if it is still running.
  void kill(int signal);
  /// `co_await child.exited()`: resumes once the child has exited and its stdout is closed;
  /// gives the exit status (128 + signal when killed).
  auto exited() {
    struct Awaiter {
      ChildProcess& child;
      bool await_ready() const noexcept { return child.finished(); }
      void await_suspend(std::coroutine_handle<> waiting) noexcept { child.waiting_ = waiting; }
      int await_resume() const noexcept { return child.exit_status_; }
    };
    return Awaiter{*this};
  }

 private:
  bool finished() const noexcept;
  void maybe_finish();

  Handles* handles_;  ///< on the heap: freed by the last close callback, which may run after us
  std::function<void(const std::string&)> on_line_;
  std::string pending_;
  int exit_status_ = -1;
  bool output_closed_ = true;
  std::coroutine_handle<> waiting_;
};
