#pragma once

#include <cstdint>

namespace redlimit::detail {

/// How many coroutine frames (Task's) this thread has allocated so far: the difference across
/// a call is the frames the call made (tests/redis/call_frames_test.cpp counts them).
std::uint64_t frames_allocated() noexcept;

}  // namespace redlimit::detail
