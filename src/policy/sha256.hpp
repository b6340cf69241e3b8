#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace redlimit::detail {

/// SHA-256 of `data` (FIPS 180-4).
std::array<std::uint8_t, 32> sha256(std::string_view data) noexcept;

}  // namespace redlimit::detail
