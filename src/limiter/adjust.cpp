// Limiter::refund, penalize and block: checked before any I/O, then one call of the adjust
// script (or the model, in process) on every limit of the key's policy.

#include <string>

#include "algorithms/exact.hpp"
#include "limiter/policy_enforcer.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

/// The longest block: four years, so that every time the scripts compute stays exact.
constexpr std::int64_t longest_block_us = std::int64_t{126'230'400} * 1'000'000;

void check_block_duration(std::int64_t duration_us) {
  if (duration_us < 1 || duration_us > longest_block_us) {
    throw InvalidArgument("block duration must be in [1us, " + std::to_string(longest_block_us) +
                          "us] (four years), got " + std::to_string(duration_us) + "us");
  }
}

/// Whether every limit of `policy` can block for `duration_us`: AdjustmentRefused or
/// InvalidArgument, naming the limit, if not.
void check_can_block(const CompiledPolicy& policy, std::int64_t duration_us) {
  for (const CompiledLimit& limit : policy.limits()) {
    const LimitSpec& spec = limit.spec;
    switch (spec.algorithm) {
      case Algorithm::fixed_window:
      case Algorithm::sliding_window_counter:
        throw AdjustmentRefused(limit.description +
                                " cannot block: its state is a window's count, which cannot "
                                "deny until an arbitrary time");
      case Algorithm::sliding_window_log:
        if (duration_us > spec.b) {
          throw AdjustmentRefused(limit.description + " can block for at most its window (" +
                                  std::to_string(spec.b) + "us), not " +
                                  std::to_string(duration_us) + "us");
        }
        break;
      case Algorithm::token_bucket: {
        // The level the block leaves, d - duration * p (in 1/d token), is a debt the bucket
        // can hold: at most max_exact - burst * d.
        const Int128 debt = static_cast<Int128>(duration_us) * spec.a - spec.b;
        if (debt > max_exact - spec.c * spec.b) {
          throw InvalidArgument(limit.description + " cannot block for " +
                                std::to_string(duration_us) +
                                "us: the debt would exceed what its bucket holds exactly");
        }
        break;
      }
      case Algorithm::gcra:
      case Algorithm::leaky_bucket:
        break;
    }
  }
}

}  // namespace

Task<void> PolicyEnforcer::adjust(std::shared_ptr<PolicyEnforcer> self, std::string key,
                                  Adjustment adjustment, std::int64_t amount) {
  if (adjustment == Adjustment::block) check_block_duration(amount);
  const std::int64_t permits = adjustment == Adjustment::block ? 1 : amount;
  // Why the turn: calls on one key apply in the order started, also behind calls that wait for
  // the loop's next turn.
  co_await self->turn_.yield_if_due();
  co_await in_force_asking_again<void>(
      std::move(self), std::move(key), Operation::acquire, permits,
      [adjustment, amount](PolicyEnforcer& enforcer, DecideRequest request) {
        return enforcer.adjust_under(std::move(request), adjustment, amount);
      });
}

Task<void> PolicyEnforcer::adjust_under(DecideRequest request, Adjustment adjustment,
                                        std::int64_t amount) {
  if (adjustment == Adjustment::block) check_can_block(*request.policy, amount);
  // Why forgotten first: a refund frees permits a remembered denial would keep refusing, and a
  // block is then denied by Redis, whose answer the cache takes. The generation keeps a denial
  // in flight from before this call out of the cache.
  forget_denial(request.key_base.view());
  const AdjustOutcome outcome = co_await backend_->adjust(request, adjustment, amount, 0);
  if (!outcome.applied) {
    const auto& limits = request.policy->limits();
    const std::string limit = outcome.refused_limit < limits.size()
                                  ? limits[outcome.refused_limit].description
                                  : std::string("a limit");
    throw AdjustmentRefused(std::string(adjustment_name(adjustment)) + " of '" +
                            std::string(request.key_base.view()) + "' refused by " + limit + ": " +
                            outcome.refusal);
  }
  // Why after Redis applied it, and only then: a refused or failed call changes nothing, and a
  // follower's call asked again (StalePolicy) must not adjust the fallback twice.
  if (!fallback_) co_return;
  const DecideRequest local = fallback_request(request);
  // Why checked again: the fallback's scaled limits may not hold a block the policy's do (a
  // token bucket's faster rate, a larger debt); the fallback then keeps its state.
  bool fallback_holds = true;
  if (adjustment == Adjustment::block) {
    try {
      check_can_block(*local.policy, amount);
    } catch (const Error&) {
      fallback_holds = false;
    }
  }
  if (fallback_holds) co_await fallback_->adjust(local, adjustment, amount, 0);
}

}  // namespace redlimit::detail
