#include "limiter/replica_writes.hpp"

#include "lua_scripts.hpp"

namespace redlimit::detail {
namespace {

/// The first element of an array reply, as an integer; -2 when there is none.
std::int64_t first_integer(const Reply& reply) {
  if (reply.type != Reply::Type::array || reply.elements.empty() ||
      reply.elements.front().type != Reply::Type::integer) {
    return -2;
  }
  return reply.elements.front().integer;
}

}  // namespace

bool reply_wrote(const scripts::ScriptSource& script, std::span<const std::string_view> args,
                 const Reply& reply) {
  if (reply.type == Reply::Type::error) return false;  // scripts check before they write
  const std::string_view op = args.empty() ? std::string_view() : args.front();
  if (&script == &scripts::decide) {
    if (op == "peek" || op == "peek_all") return false;
    return first_integer(reply) == 1;  // 0 denied, -1 stale
  }
  if (script.name.starts_with("decide_")) {  // lean: "1 ..." allowed, "0 ..." or "stale ..."
    return reply.type != Reply::Type::string || reply.str.starts_with("1 ");
  }
  if (&script == &scripts::reserve) {
    if (op == "reserve" || op == "reserve_all") return first_integer(reply) == 1;
    if (op == "reclaim") return first_integer(reply) != 0;  // {reclaimed, now}
    if (op == "locate") return false;                       // reads only
    return true;  // cancel, confirm, renew, earliest_all: conservatively
  }
  if (&script == &scripts::semaphore) {
    // acquire {granted, ...}, renew {held, ...}; a release removes permits, or voids the lease
    if (op == "release") return true;
    return first_integer(reply) != 0;
  }
  if (&script == &scripts::policy_store) return op != "read";
  return true;
}

}  // namespace redlimit::detail
