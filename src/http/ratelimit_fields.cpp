#include "redlimit/ratelimit_fields.hpp"

#include <algorithm>
#include <numeric>

#include "redlimit/errors.hpp"

namespace redlimit {
namespace {

using std::chrono::microseconds;

/// The longest window w describes: about 31 years, where whole seconds stay exact in 64 bits
/// of microseconds many times over.
constexpr std::int64_t longest_window_seconds = 1'000'000'000;

/// Throws InvalidArgument unless `text` is printable ASCII: what a String item can hold.
void check_sf_string(std::string_view text) {
  for (const char c : text) {
    if (c < 0x20 || c > 0x7e) {
      throw InvalidArgument("a quota policy name must be printable ASCII, got '" +
                            std::string(text) + "'");
    }
  }
}

/// Appends `text` as a String item (RFC 9651 §4.1.6): printable ASCII in double quotes, with "
/// and \ escaped.
void append_sf_string(std::string& out, std::string_view text) {
  check_sf_string(text);
  out += '"';
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

/// Appends `;<key>=<value>`: an Integer parameter.
void append_parameter(std::string& out, char key, std::int64_t value) {
  out += ';';
  out += key;
  out += '=';
  out += std::to_string(value);
}

/// Base64 with padding (RFC 4648 §4), as Byte Sequences use it (RFC 9651 §4.1.8).
std::string base64(std::string_view bytes) {
  static constexpr char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    std::uint32_t group = 0;
    for (std::size_t j = 0; j < 3; ++j)
      group = (group << 8) | (j < n ? static_cast<unsigned char>(bytes[i + j]) : 0u);
    for (std::size_t j = 0; j < 4; ++j)
      out += j <= n ? alphabet[(group >> (18 - 6 * j)) & 0x3f] : '=';
  }
  return out;
}

/// The pk parameter for `partition`: its FNV-1a 64-bit digest, big-endian, as a Byte Sequence.
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

/// Whether a failure policy answered `decision`, knowing nothing of the quota.
bool knows_quota(const Decision& decision) {
  return decision.source != Source::fail_open && decision.source != Source::fail_closed;
}

}  // namespace

QuotaPolicy quota_policy(std::string name, const Limit& limit) {
  check_sf_string(name);
  const std::int64_t period_us = limit.rate.period.count();
  const std::int64_t permits = limit.rate.permits;
  if (period_us <= 0 || permits <= 0) {
    throw InvalidArgument("quota policy " + name + ": the rate " + to_string(limit.rate) +
                          " is not a rate");
  }
  const std::int64_t second_us = 1'000'000;
  if (period_us % second_us == 0)
    return QuotaPolicy{std::move(name), permits, period_us / second_us};
  // Else the shortest window of whole seconds that holds a whole number of permits: a multiple
  // of one second and of period / gcd(period, permits).
  const std::int64_t common = std::gcd(period_us, permits);
  const std::int64_t step_us = period_us / common;
  const std::int64_t window_s = step_us / std::gcd(step_us, second_us);
  // Why exact: window_s * 10^6 is a multiple of step_us, so permits * window / period is whole.
  std::int64_t quota = 0;
  if (window_s > longest_window_seconds ||
      __builtin_mul_overflow(permits / common, window_s * second_us / step_us, &quota)) {
    throw InvalidArgument("quota policy " + name + ": the rate " + to_string(limit.rate) +
                          " holds a whole number of permits in no window of whole seconds "
                          "up to " +
                          std::to_string(longest_window_seconds) + " s");
  }
  return QuotaPolicy{std::move(name), quota, window_s};
}

std::string ratelimit_policy_field(std::span<const QuotaPolicy> quotas) {
  std::string out;
  for (const QuotaPolicy& quota : quotas) {
    if (!out.empty()) out += ", ";
    append_sf_string(out, quota.name);
    append_parameter(out, 'q', quota.quota);
    append_parameter(out, 'w', quota.window_seconds);
  }
  return out;
}

std::string ratelimit_field(const QuotaPolicy& binding, const Decision& decision,
                            std::string_view partition) {
  std::string out;
  append_sf_string(out, binding.name);
  append_parameter(out, 'r', std::max<std::int64_t>(decision.remaining, 0));
  append_parameter(
      out, 't', whole_seconds_up(decision.allowed ? decision.reset_after : decision.retry_after));
  if (!partition.empty()) out += ";pk=" + partition_key(partition);
  return out;
}

std::vector<HeaderField> ratelimit_fields(const Policy& policy, const Decision& decision,
                                          const RateLimitFieldOptions& options) {
  std::vector<QuotaPolicy> quotas;
  quotas.reserve(policy.limits.size());
  for (std::size_t i = 0; i < policy.limits.size(); ++i) {
    const Limit& limit = policy.limits[i];
    quotas.push_back(
        quota_policy(i < options.names.size() ? options.names[i] : to_string(limit.rate), limit));
  }
  return ratelimit_fields(quotas, decision, options);
}

std::vector<HeaderField> ratelimit_fields(std::span<const QuotaPolicy> quotas,
                                          const Decision& decision,
                                          const RateLimitFieldOptions& options) {
  if (decision.binding >= quotas.size()) {
    throw InvalidArgument("ratelimit_fields: the decision's binding limit " +
                          std::to_string(decision.binding) + " is not one of the policy's " +
                          std::to_string(quotas.size()));
  }
  const QuotaPolicy& binding = quotas[decision.binding];
  const bool known = knows_quota(decision);
  std::vector<HeaderField> fields;
  fields.reserve(2 + (decision.allowed ? 0 : 1) + (options.x_ratelimit && known ? 3 : 0));
  fields.push_back({"RateLimit-Policy", ratelimit_policy_field(quotas)});
  if (known) fields.push_back({"RateLimit", ratelimit_field(binding, decision, options.partition)});
  if (!decision.allowed) {
    fields.push_back({"Retry-After", std::to_string(whole_seconds_up(decision.retry_after))});
  }
  if (options.x_ratelimit && known) {
    const std::int64_t reset =
        whole_seconds_up(decision.allowed ? decision.reset_after : decision.retry_after);
    fields.push_back({"X-RateLimit-Limit", std::to_string(binding.quota)});
    fields.push_back(
        {"X-RateLimit-Remaining", std::to_string(std::max<std::int64_t>(decision.remaining, 0))});
    fields.push_back({"X-RateLimit-Reset", std::to_string(reset)});
  }
  return fields;
}

std::int64_t whole_seconds_up(microseconds duration) {
  return std::max<std::int64_t>(std::chrono::ceil<std::chrono::seconds>(duration).count(), 0);
}

}  // namespace redlimit
