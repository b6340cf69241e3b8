#pragma once
// Counting heap allocations: this program replaces malloc, calloc and realloc with versions that
// count and then call glibc's. Under AddressSanitizer (which owns malloc) nothing is counted.

#include <cstdint>
#include <optional>

/// Allocations made by this process so far; nullopt when they cannot be counted.
std::optional<std::uint64_t> allocations_so_far();
