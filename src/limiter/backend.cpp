// The typed front of Backend::run(): each operation run alone, its result returned.

#include "limiter/backend.hpp"

#include <algorithm>

#include "runtime/together.hpp"

namespace redlimit::detail {
namespace {

/// The result of `op` (an `Op`) once `backend` ran it alone.
template <class Op>
Task<decltype(Op::result)> result_of(Backend& backend, BackendOp op) {
  co_await backend.run({&op, 1});
  co_return std::move(std::get<Op>(op).result);
}

}  // namespace

Task<void> run_together(std::span<BackendOp> ops, std::function<Task<void>(BackendOp&)> one) {
  std::vector<Task<void>> tasks;
  tasks.reserve(ops.size());
  for (BackendOp& op : ops)
    tasks.push_back(one(op));
  co_await Together(std::move(tasks));
}

Task<Decision> Backend::decide(const DecideRequest& request) {
  return result_of<DecideOp>(*this, DecideOp{request});
}

Task<AdjustOutcome> Backend::adjust(const DecideRequest& request, Adjustment adjustment,
                                    std::int64_t amount, std::int64_t taken_at_us) {
  return result_of<AdjustOp>(*this, AdjustOp{request, adjustment, amount, taken_at_us});
}

Task<void> Backend::reset(std::shared_ptr<const CompiledPolicy> policy, std::string key_base,
                          std::int64_t now_us) {
  BackendOp op = ResetOp{std::move(policy), std::move(key_base), now_us};
  co_await run({&op, 1});
}

Task<std::optional<std::chrono::milliseconds>> Backend::ttl(std::string key) {
  return result_of<TtlOp>(*this, TtlOp{std::move(key)});
}

Task<Reservation> Backend::reserve(DecideRequest request, std::int64_t max_wait_us) {
  return result_of<ReserveOp>(*this, ReserveOp{std::move(request), max_wait_us});
}

Task<ReservationReply> Backend::run_reservation(ReservationOperation operation,
                                                DecideRequest request, CancelTicket ticket) {
  return result_of<ReservationOp>(*this, ReservationOp{operation, std::move(request), ticket});
}

Task<LeaseReply> Backend::run_lease(LeaseOperation operation, LeaseRequest request) {
  return result_of<LeaseOp>(*this, LeaseOp{operation, std::move(request)});
}

Task<ClaimsDecision> Backend::decide_claims(std::span<Backend* const> backends,
                                            std::span<const DecideRequest> requests,
                                            Operation operation) {
  return result_of<DecideClaimsOp>(*this, DecideClaimsOp{backends, requests, operation});
}

Task<ClaimsReservation> Backend::reserve_claims(std::span<Backend* const> backends,
                                                std::span<const DecideRequest> requests,
                                                std::function<std::int64_t()> max_wait_us) {
  return result_of<ReserveClaimsOp>(*this,
                                    ReserveClaimsOp{backends, requests, std::move(max_wait_us)});
}

Task<ClaimsReservation> Backend::reserve_group(std::span<const DecideRequest> requests,
                                               std::int64_t max_wait_us,
                                               std::int64_t earliest_slot_us, bool earliest_only) {
  return result_of<ReserveGroupOp>(
      *this, ReserveGroupOp{requests, max_wait_us, earliest_slot_us, earliest_only});
}

Decision binding_decision(std::span<const Decision> decisions) {
  const bool all_allowed = std::ranges::all_of(decisions, &Decision::allowed);
  std::size_t binding = 0;
  for (std::size_t i = 1; i < decisions.size(); ++i) {
    const Decision& candidate = decisions[i];
    const Decision& best = decisions[binding];
    if (all_allowed
            ? candidate.remaining < best.remaining
            : !candidate.allowed && (best.allowed || candidate.retry_after > best.retry_after)) {
      binding = i;
    }
  }
  Decision out = decisions[binding];
  out.allowed = all_allowed;
  out.claim = binding;
  return out;
}

}  // namespace redlimit::detail
