#include <array>
#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

#include "redlimit/task.hpp"
#include "runtime/frame_count.hpp"

namespace redlimit::detail {
namespace {

#if !defined(__SANITIZE_ADDRESS__)

constexpr std::size_t granule = 64;
constexpr std::size_t classes = 32;  ///< frames up to 2 KiB are pooled
/// Blocks kept per class: enough for thousands of calls in flight, and a bound on what an
/// idle thread holds (at most 2 KiB x 4096 per class).
constexpr std::size_t kept_per_class = 4096;

struct FreeBlock {
  FreeBlock* next;
};

/// One thread's free blocks. A thread keeps freed blocks only while `keeping`: from its first
/// allocation from the heap until it begins to exit.
// Why trivially constructible and destructible: such a thread_local is reached with a single
// TLS lookup per call, where one with a destructor goes through a wrapper and a guard on every
// access (TLS lookups had been 7% of the client's CPU per decision).
struct FramePool {
  std::array<FreeBlock*, classes> heads;
  std::array<std::size_t, classes> counts;
  bool keeping;
  bool retired;
};

constinit thread_local FramePool pool{};

/// Hands the blocks a thread kept back to the heap when the thread exits.
struct PoolRelease {
  ~PoolRelease() {
    pool.keeping = false;
    pool.retired = true;
    for (FreeBlock*& head : pool.heads) {
      while (head != nullptr)
        ::operator delete(std::exchange(head, head->next));
    }
  }
};

void start_keeping() {
  // Why a function-local thread_local: it is constructed, and its destructor registered for
  // this thread, exactly when control first passes here.
  thread_local PoolRelease release;
  pool.keeping = true;
}

std::size_t class_of(std::size_t size) {
  return (size - 1) / granule;
}

#endif

/// Coroutine frames allocated on this thread (frames_allocated()).
// Why apart from the pool: the pool exists only outside AddressSanitizer; the count always.
constinit thread_local std::uint64_t coroutine_frames = 0;

/// A block for `size` bytes: from this thread's pool when it has one, else the heap.
inline void* allocate_block(std::size_t size) {
#if !defined(__SANITIZE_ADDRESS__)
  const std::size_t cls = class_of(size);
  if (cls < classes) {
    FramePool& local = pool;
    if (FreeBlock* block = local.heads[cls]) {
      local.heads[cls] = block->next;
      --local.counts[cls];
      return block;
    }
    // Why here and not when a block is freed: this path is rare, and a branch that may call a
    // function makes g++ look the TLS address up twice.
    if (!local.keeping && !local.retired) start_keeping();
    // Why the whole class size: the block may be freed on a thread whose pool will hand it
    // out again for any frame of its class.
    return ::operator new((cls + 1) * granule);
  }
#endif
  return ::operator new(size);
}

}  // namespace

std::uint64_t frames_allocated() noexcept {
  return coroutine_frames;
}

// Why both through one inlined allocate_block(): the pool and the count are thread-locals of
// this file, reached with one lookup of the module's TLS block.
void* allocate_frame(std::size_t size) {
  return allocate_block(size);
}

void* allocate_coroutine_frame(std::size_t size) {
  ++coroutine_frames;
  return allocate_block(size);
}

void free_frame(void* frame, [[maybe_unused]] std::size_t size) noexcept {
#if !defined(__SANITIZE_ADDRESS__)
  const std::size_t cls = class_of(size);
  FramePool& local = pool;
  if (cls < classes && local.keeping && local.counts[cls] < kept_per_class) {
    local.heads[cls] = new (frame) FreeBlock{local.heads[cls]};
    ++local.counts[cls];
    return;
  }
#endif
  ::operator delete(frame);
}

}  // namespace redlimit::detail
