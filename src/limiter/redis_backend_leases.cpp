// RedisBackend's semaphore operations: one EVALSHA of lua/semaphore.lua each.

#include <array>

#include "limiter/redis_backend.hpp"
#include "lua_scripts.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

Task<void> RedisBackend::perform(LeaseOp& op) {
  const LeaseRequest& request = op.request;
  const std::string voided = request.key + ":voided";
  const std::array<std::string_view, 2> keys = {request.key, voided};
  // In the script's words, in LeaseOperation's order.
  constexpr std::array<std::string_view, 3> names = {"acquire", "renew", "release"};
  const std::string_view name = names[static_cast<std::size_t>(op.operation)];
  const std::string now = request.now_us != 0 ? std::to_string(request.now_us) : std::string();
  const std::string capacity = std::to_string(request.capacity);
  const std::string permits = std::to_string(request.permits);
  const std::string ttl = std::to_string(request.ttl_us);
  const std::array<std::string_view, 6> args = {name, now, capacity, permits, request.lease_id,
                                                ttl};
  const Reply reply =
      co_await calls_.eval(scripts::semaphore, keys, args, client_.command_deadline());
  const auto& fields = reply.as_array();
  if (fields.size() < 2) throw ProtocolError("the semaphore script returned too few fields");
  LeaseReply& out = op.result;
  out.granted = fields[0].as_integer() >= 1;
  out.now_us = fields[1].as_integer();
  if (fields.size() >= 3) out.expires_or_free_at_us = fields[2].as_integer();
}

std::uint64_t RedisBackend::watch_releases(std::string key, std::function<void()> handler) {
  // Why a named lambda: the subscriber keeps the handler; the release count is not needed.
  auto on_message = [handler](std::string_view) { handler(); };
  // Why the handler on each confirmation too: a release published before the subscription was
  // confirmed (the first time, or after a reconnect) was heard by nobody.
  return client_.subscriber().subscribe(key + ":released", std::move(on_message),
                                        std::move(handler));
}

}  // namespace redlimit::detail
