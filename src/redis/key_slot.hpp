#pragma once

#include <cstdint>
#include <string_view>

namespace redlimit::detail {

/// Number of hash slots in Redis Cluster.
inline constexpr std::uint16_t slot_count = 16384;

/// CRC16/XMODEM, the checksum Redis Cluster uses for key slots.
std::uint16_t crc16(std::string_view data) noexcept;

/// The part of `key` that is hashed: the text between the first '{' and the first '}' after
/// it, if that is non-empty; otherwise the whole key.
std::string_view hash_tag(std::string_view key) noexcept;

/// The cluster slot of `key`: crc16(hash_tag(key)) mod 16384.
std::uint16_t key_slot(std::string_view key) noexcept;

}  // namespace redlimit::detail
