#include "allocation_counter.hpp"

#include <atomic>
#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)

std::optional<std::uint64_t> allocations_so_far() {
  return std::nullopt;
}

#else

namespace {
std::atomic<std::uint64_t> allocations{0};
}  // namespace

extern "C" {
void* __libc_malloc(std::size_t size);
void* __libc_calloc(std::size_t count, std::size_t size);
void* __libc_realloc(void* pointer, std::size_t size);

// Why these names: glibc resolves malloc from the executable first, so every allocation of the
// process (libstdc++'s operator new, hiredis, libuv) comes through here.
void* malloc(std::size_t size) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(size);
}
void* calloc(std::size_t count, std::size_t size) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_calloc(count, size);
}
void* realloc(void* pointer, std::size_t size) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_realloc(pointer, size);
}
}

std::optional<std::uint64_t> allocations_so_far() {
  return allocations.load(std::memory_order_relaxed);
}

#endif
