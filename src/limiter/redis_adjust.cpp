// Limiter::refund, penalize and block in Redis: one call of the adjust script.

#include <string>
#include <vector>

#include "limiter/redis_backend.hpp"
#include "lua_scripts.hpp"
#include "policy/stale_policy.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

/// The outcome in a reply of the adjust script; ProtocolError if it has another shape.
AdjustOutcome adjust_outcome_from_reply(const Reply& reply, std::size_t limit_count) {
  const auto& fields = reply.as_array();
  if (fields.size() == 2 && fields[0].as_integer() == -1) throw StalePolicy(fields[1].as_integer());
  AdjustOutcome outcome;
  if (fields.size() == 2 && fields[0].as_integer() == 1) {
    outcome.applied = true;
    outcome.now_us = fields[1].as_integer();
    return outcome;
  }
  if (fields.size() != 3 || fields[0].as_integer() != 0) {
    throw ProtocolError("the adjust script returned an unexpected reply of " +
                        std::to_string(fields.size()) + " fields");
  }
  outcome.refused_limit = reply_index(fields[1].as_integer(), limit_count, "adjust");
  outcome.refusal = fields[2].as_string();
  return outcome;
}

}  // namespace

Task<void> RedisBackend::perform(AdjustOp& op) {
  GeneralScriptCall call({&op.request, 1}, adjustment_name(op.adjustment), op.amount);
  if (op.adjustment == Adjustment::give_back) {
    call.add_number(op.taken_at_us);
    call.add_key(reset_mark_key(op.request.key_base.view()));
  }
  const Reply reply =
      co_await calls_.eval(scripts::adjust, call.keys(), call.args(), client_.command_deadline());
  op.result = adjust_outcome_from_reply(reply, op.request.policy->limits().size());
}

}  // namespace redlimit::detail
