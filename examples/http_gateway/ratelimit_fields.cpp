#include "ratelimit_fields.hpp"

#include <algorithm>
#include <stdexcept>

namespace http_gateway {
namespace {

/// A String item (RFC 9651 §4.1.6): printable ASCII in double quotes, with " and \ escaped.
std::string sf_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c < 0x20 || c > 0x7e) throw std::invalid_argument("not printable ASCII: policy name");
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

/// Base64 with padding (RFC 4648 §4), as Byte Sequences use it (RFC 9651 §4.1.8).
std::string base64(std::string_view bytes) {
  static constexpr char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    std::uint32_t group = 0;
    for (std::size_t j = 0; j < 3; ++j) {
      group = (group << 8) | (j < n ? static_cast<unsigned char>(bytes[i + j]) : 0u);
    }
    for (std::size_t j = 0; j < 4; ++j) {
      out += j <= n ? alphabet[(group >> (18 - 6 * j)) & 0x3f] : '=';
    }
  }
  return out;
}

}  // namespace

QuotaPolicy describe(std::string name, const redlimit::Limit& limit) {
  const std::chrono::microseconds period = limit.rate.period;
  if (period < std::chrono::seconds(1) || period % std::chrono::seconds(1) != period.zero()) {
    throw std::invalid_argument(name + " limit " + redlimit::to_string(limit.rate) +
                                ": its period must be whole seconds (the w parameter)");
  }
  sf_string(name);  // validates the name
  return QuotaPolicy{std::move(name), limit.rate.permits,
                     std::chrono::duration_cast<std::chrono::seconds>(period).count()};
}

std::string policy_field(const std::vector<QuotaPolicy>& quotas) {
  std::string out;
  for (const QuotaPolicy& quota : quotas) {
    if (!out.empty()) out += ", ";
    out += sf_string(quota.name) + ";q=" + std::to_string(quota.quota) +
           ";w=" + std::to_string(quota.window);
  }
  return out;
}

std::string limit_field(const QuotaPolicy& binding, const redlimit::Decision& decision,
                        std::string_view partition) {
  const std::int64_t reset =
      whole_seconds_up(decision.allowed ? decision.reset_after : decision.retry_after);
  return sf_string(binding.name) +
         ";r=" + std::to_string(std::max<std::int64_t>(decision.remaining, 0)) +
         ";t=" + std::to_string(reset) + ";pk=" + partition_key(partition);
}

std::int64_t whole_seconds_up(std::chrono::microseconds duration) {
  return std::max<std::int64_t>(std::chrono::ceil<std::chrono::seconds>(duration).count(), 0);
}

std::string partition_key(std::string_view partition) {
  std::uint64_t hash = 14695981039346656037ull;  // FNV-1a 64: offset basis, then prime
  for (const char c : partition) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  std::string bytes(8, '\0');
  for (std::size_t i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>(hash >> (56 - 8 * i));
  return ":" + base64(bytes) + ":";
}

}  // namespace http_gateway
