#pragma once

#include <utility>

#include "redlimit/task.hpp"
#include "redlimit/task_group.hpp"

namespace redlimit::test {

/// Runs `first` and `second` at once; ends when both have ended (rethrows the first error).
inline Task<void> both(Task<void> first, Task<void> second) {
  TaskGroup group;
  group.add(std::move(first));
  group.add(std::move(second));
  co_await group.join();
}

}  // namespace redlimit::test
