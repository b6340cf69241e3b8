#pragma once

#include <utility>

#include "redlimit/limit.hpp"
#include "redlimit/task.hpp"

namespace redlimit::test {

/// A call's decision, and whether it came yet: for tests that look at calls still under way.
struct Answer {
  bool done = false;
  Decision decision{};
};

/// Awaits `call` and records its decision in `answer`.
inline Task<void> answer_of(Task<Decision> call, Answer* answer) {
  answer->decision = co_await std::move(call);
  answer->done = true;
}

}  // namespace redlimit::test
