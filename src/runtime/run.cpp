#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"

namespace redlimit::detail {
namespace {
thread_local int loop_depth = 0;
}

LoopScope::LoopScope() noexcept {
  ++loop_depth;
}
LoopScope::~LoopScope() {
  --loop_depth;
}
bool LoopScope::active() noexcept {
  return loop_depth > 0;
}

void ensure_outside_loop(const char* caller) {
  if (LoopScope::active()) {
    throw UsageError(std::string(caller) +
                     " called from inside the event loop (uv_run is not reentrant); "
                     "co_await the task instead");
  }
}

void Driver::run_to_completion(uv_loop_t* loop) {
  state_.loop = loop;
  handle_.promise().state = &state_;
  LoopScope scope;
  handle_.resume();
  while (!state_.done) {
    state_.loop_running = true;
    const int alive = uv_run(loop, UV_RUN_DEFAULT);
    state_.loop_running = false;
    if (!state_.done && alive == 0) {
      throw UsageError(
          "redlimit::run(): the event loop has nothing left to do but the task has not ended "
          "(it waits for something that can never happen)");
    }
  }
}

}  // namespace redlimit::detail
