#pragma once

#include <chrono>
#include <span>
#include <string_view>

#include "redis/script_source.hpp"
#include "redlimit/reply.hpp"
#include "redlimit/task.hpp"

namespace redlimit::detail {

/// Runs script calls for limiters and semaphores. The CommandDispatcher runs each one as one
/// command; a decorator over it (the limiters' batching, src/limiter/batching_executor.hpp)
/// may run several as one. Whoever sends the calls picks which.
class ScriptExecutor {
 public:
  using Clock = std::chrono::steady_clock;

  /// Runs `script` on `keys` and `args` by `deadline`; an error reply is raised. `keys` and
  /// `args` must stay valid until the task ends (co_await it at once).
  virtual Task<Reply> eval(const scripts::ScriptSource& script,
                           std::span<const std::string_view> keys,
                           std::span<const std::string_view> args, Clock::time_point deadline) = 0;

 protected:
  ~ScriptExecutor() = default;
};

/// A ScriptExecutor kept by a client for its whole life (CommandDispatcher::decorator), shared
/// by every limiter and semaphore on it.
class ExecutorDecorator : public ScriptExecutor {
 public:
  virtual ~ExecutorDecorator() = default;
  /// Answers every call it holds; calls made afterwards go straight through. The client's
  /// close() awaits it before closing the connections.
  virtual Task<void> close() = 0;
};

}  // namespace redlimit::detail
