#include "redis/slot_router.hpp"

#include <algorithm>
#include <array>
#include <string_view>

#include "redis/reply_convert.hpp"

namespace redlimit::detail {
namespace {

/// The pause before retrying an error that says "not now" (a slot migrating, a failover in
/// progress): 2, 4, 8 ... ms, at most 100 ms.
std::chrono::milliseconds retry_delay(int retries) {
  return std::chrono::milliseconds(std::min(100, 2 << std::min(retries, 6)));
}

}  // namespace

NextTry SlotRouter::pause_if_not_now(const Reply& reply, Hops& hops) {
  const ErrorReplyKind kind = classify_error_reply(reply.str);
  const std::string code = error_code(reply.str);
  // Why BUSY: another client's script runs (this command did not start); it ends, or is
  // killed, soon. The topology is as it was.
  const bool busy = code == "BUSY";
  if (kind != ErrorReplyKind::retry_soon && kind != ErrorReplyKind::stale_primary && !busy) {
    return {};
  }
  if (code != "TRYAGAIN" && !busy) suspect_topology();
  return pause(hops);
}

NextTry SlotRouter::pause(Hops& hops) {
  // Why the redirects start again: a call of several keys on a migrating slot goes ASK, then
  // TRYAGAIN after ASKING, until the slot has one owner; each pause routes it afresh, and the
  // deadline, not the redirects of earlier tries, bounds how long it waits.
  hops.redirects = 0;
  return {.kind = NextTry::Kind::retry, .delay = retry_delay(hops.retries++)};
}

NextTry SingleNodeRouter::next_try(const TryOutcome& outcome, std::optional<std::uint16_t>,
                                   Hops& hops) {
  if (outcome.reply == nullptr || outcome.reply->type != Reply::Type::error) return {};
  return pause_if_not_now(*outcome.reply, hops);
}

Task<void> SingleNodeRouter::connect(Clock::time_point deadline) {
  static constexpr std::array<std::string_view, 1> ping = {"PING"};
  CommandResult result = co_await connection_->send(ping, deadline);
  if (result.reply.type == Reply::Type::error) {
    std::rethrow_exception(exception_from_error(result.reply.str));
  }
}

}  // namespace redlimit::detail
