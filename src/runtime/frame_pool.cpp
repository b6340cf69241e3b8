#include <array>
#include <cstddef>
#include <new>
#include <utility>

#include "redlimit/task.hpp"

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

/// One thread's free blocks. Blocks freed after the thread's pool is gone go back to the heap.
class FramePool {
 public:
  ~FramePool() {
    alive = false;
    for (FreeBlock* head : heads_) {
      while (head != nullptr)
        ::operator delete(std::exchange(head, head->next));
    }
  }
  void* take(std::size_t cls) {
    FreeBlock* block = heads_[cls];
    if (block == nullptr) return ::operator new((cls + 1) * granule);
    heads_[cls] = block->next;
    --counts_[cls];
    return block;
  }
  void give(void* frame, std::size_t cls) noexcept {
    if (counts_[cls] == kept_per_class) return ::operator delete(frame);
    heads_[cls] = new (frame) FreeBlock{heads_[cls]};
    ++counts_[cls];
  }
  static thread_local bool alive;

 private:
  std::array<FreeBlock*, classes> heads_{};
  std::array<std::size_t, classes> counts_{};
};

thread_local bool FramePool::alive = true;
thread_local FramePool pool;

std::size_t class_of(std::size_t size) {
  return (size - 1) / granule;
}

#endif

}  // namespace

void* allocate_frame(std::size_t size) {
#if !defined(__SANITIZE_ADDRESS__)
  const std::size_t cls = class_of(size);
  if (cls < classes) {
    // Why the whole class size even without a pool: the block may be freed on a thread whose
    // pool is alive, which will hand it out again for any frame of its class.
    return FramePool::alive ? pool.take(cls) : ::operator new((cls + 1) * granule);
  }
#endif
  return ::operator new(size);
}

void free_frame(void* frame, [[maybe_unused]] std::size_t size) noexcept {
#if !defined(__SANITIZE_ADDRESS__)
  const std::size_t cls = class_of(size);
  if (cls < classes && FramePool::alive) return pool.give(frame, cls);
#endif
  ::operator delete(frame);
}

}  // namespace redlimit::detail
