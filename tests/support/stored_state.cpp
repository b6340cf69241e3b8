#include "support/stored_state.hpp"

#include <initializer_list>
#include <variant>

namespace redlimit::test {

std::optional<std::string> stored_value(const detail::LimitState& state) {
  const auto join = [](std::initializer_list<std::int64_t> fields) {
    std::string out;
    for (const std::int64_t field : fields)
      out += (out.empty() ? "" : ":") + std::to_string(field);
    return out;
  };
  if (const auto* time = std::get_if<detail::GcraState>(&state)) {
    const detail::Stamp stamp = time->stamp.value_or(detail::Stamp{});
    return join({time->tat.us, time->tat.frac, time->den, time->book.version, time->book.cancels,
                 time->book.epoch, stamp.b, stamp.c, stamp.policy_version,
                 time->written_us.value_or(0)});
  }
  if (const auto* tokens = std::get_if<detail::TokenBucketState>(&state)) {
    const detail::Stamp stamp = tokens->stamp.value_or(detail::Stamp{});
    return join({tokens->level, tokens->last_us, tokens->den, tokens->book.version,
                 tokens->book.cancels, tokens->book.epoch, stamp.a, stamp.c, stamp.policy_version});
  }
  if (const auto* window = std::get_if<detail::FixedWindowState>(&state)) {
    const detail::Stamp stamp = window->stamp.value_or(detail::Stamp{});
    return join({window->start_us, window->count, stamp.a, stamp.b, stamp.c, stamp.policy_version});
  }
  if (const auto* counter = std::get_if<detail::SlidingWindowCounterState>(&state)) {
    const detail::Stamp stamp = counter->stamp.value_or(detail::Stamp{});
    return join({counter->start_us, counter->current, counter->previous, stamp.a, stamp.b,
                 stamp.policy_version});
  }
  return std::nullopt;
}

std::optional<std::string> stored_log(const detail::LimitState& state) {
  const auto* log = std::get_if<detail::SlidingWindowLogState>(&state);
  if (log == nullptr || (!log->stamp && log->times.empty())) return std::nullopt;
  std::string out;
  if (log->stamp) {
    out = "stamp:" + std::to_string(log->stamp->a) + ":" + std::to_string(log->stamp->b) + ":" +
          std::to_string(log->stamp->policy_version);
  }
  for (const std::int64_t time : log->times)
    out += (out.empty() ? "" : " ") + std::to_string(time);
  return out;
}

std::optional<std::string> stored_log(const Reply& reply) {
  const auto& fields = reply.as_array();
  std::string out;
  for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
    const std::string& member = fields[i].as_string();
    out += (out.empty() ? "" : " ") +
           (member.starts_with("stamp:") ? member : fields[i + 1].as_string());
  }
  return fields.empty() ? std::nullopt : std::optional<std::string>(out);
}

}  // namespace redlimit::test
