#pragma once

#include <uv.h>

#include <utility>
#include <vector>

#include "runtime/close_latch.hpp"
#include "runtime/uv_handles.hpp"

namespace redlimit::detail {

/// Work to run on the next loop iteration, in order, never inline: resumptions that must not
/// happen inside hiredis (redisAsyncFree runs callbacks synchronously) or inside a timer sweep.
class ReadyQueue {
 public:
  using Work = void (*)(void* argument);

  ReadyQueue(uv_loop_t* loop, CloseLatch* latch) : idle_(loop, &on_idle, this, latch) {}

  void push(Work work, void* argument) {
    if (items_.empty()) idle_.start();
    items_.emplace_back(work, argument);
  }
  bool empty() const noexcept { return items_.empty(); }
  /// Closes the idle handle; the queue must be empty.
  void close() noexcept { idle_.close(); }

 private:
  static void on_idle(void* self) {
    auto* queue = static_cast<ReadyQueue*>(self);
    std::vector<std::pair<Work, void*>> batch;
    batch.swap(queue->items_);
    queue->idle_.stop();
    // Why: work may push more (it starts the idle handle again) but cannot destroy the queue,
    // whose owner is only destroyed after close(), which waits until the queue is empty.
    for (const auto& [work, argument] : batch)
      work(argument);
  }

  Idle idle_;
  std::vector<std::pair<Work, void*>> items_;
};

}  // namespace redlimit::detail
