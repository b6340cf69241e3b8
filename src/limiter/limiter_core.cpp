#include "limiter/limiter_core.hpp"

#include <spdlog/spdlog.h>

#include "algorithms/reservations.hpp"
#include "limiter/key_format.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "runtime/logger.hpp"

namespace redlimit::detail {
namespace {

LimiterOptions validated(LimiterOptions options) {
  if (options.name.empty() || options.name.size() > 128) {
    throw InvalidArgument("LimiterOptions::name must be 1 to 128 bytes, got " +
                          std::to_string(options.name.size()));
  }
  const bool prefix_ok = !options.prefix.empty() && options.prefix.size() <= 64 &&
                         options.prefix.find_first_not_of(
                             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                             "0123456789_.-") == std::string::npos;
  if (!prefix_ok) {
    throw InvalidArgument(
        "LimiterOptions::prefix must be 1 to 64 characters from "
        "[A-Za-z0-9_.-], got '" +
        options.prefix + "'");
  }
  if (!(options.on_failure.local_share > 0.0 && options.on_failure.local_share <= 1.0)) {
    throw InvalidArgument("LimiterOptions::on_failure.local_share must be in (0, 1]");
  }
  return options;
}

}  // namespace

LimiterCore::LimiterCore(uv_loop_t* loop, std::unique_ptr<Backend> backend, Policy policy,
                         LimiterOptions options)
    : loop_(loop),
      options_(validated(std::move(options))),
      escaped_name_(escape_key_part(options_.name)),
      policy_(CompiledPolicy::compile(std::move(policy))),
      backend_(std::move(backend)) {}

DecideRequest LimiterCore::request(std::string_view key, Operation operation,
                                   std::int64_t permits) const {
  if (key.empty()) throw InvalidArgument("key must not be empty");
  if (key.size() > max_key_bytes) {
    throw InvalidArgument("key must be at most " + std::to_string(max_key_bytes) + " bytes, got " +
                          std::to_string(key.size()));
  }
  policy_->check_permits(permits);
  return DecideRequest(policy_, key_base(options_.prefix, escaped_name_, key), operation, permits);
}

Task<Decision> LimiterCore::try_acquire(std::string key, std::int64_t permits) {
  co_return co_await backend_->decide(request(key, Operation::acquire, permits));
}

Task<Decision> LimiterCore::peek(std::string key) {
  co_return co_await backend_->decide(request(key, Operation::peek, 1));
}

Task<void> LimiterCore::reset(std::string key) {
  DecideRequest validated_request = request(key, Operation::peek, 1);
  co_await backend_->reset(std::move(validated_request.policy),
                           std::move(validated_request.key_base));
}

namespace {

using Clock = std::chrono::steady_clock;

/// The longest wait a reservation may have (2^40 us, 12.7 days): keeps every script value exact.
constexpr std::int64_t max_reservation_wait_us = std::int64_t{1} << 40;

std::chrono::microseconds since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
}

bool reservable(const CompiledPolicy& policy) {
  return policy.limits().size() == 1 && can_reserve(policy.limits().front().limit.algorithm);
}

}  // namespace

Task<Decision> LimiterCore::acquire(std::string key, std::int64_t permits, AcquireOptions options) {
  DecideRequest validated_request = request(key, Operation::acquire, permits);
  if (options.max_wait.count() < 0) {
    throw InvalidArgument("AcquireOptions::max_wait must not be negative, got " +
                          std::to_string(options.max_wait.count()) + " us");
  }
  if (options.stop.stop_requested()) throw Cancelled("acquire cancelled before it started");
  if (reservable(*validated_request.policy)) {
    co_return co_await acquire_by_reserving(std::move(validated_request), std::move(options));
  }
  co_return co_await acquire_by_retrying(std::move(validated_request), std::move(options));
}

Task<Decision> LimiterCore::acquire_by_retrying(DecideRequest request, AcquireOptions options) {
  const auto started = Clock::now();
  for (;;) {
    Decision decision = co_await backend_->decide(request);
    const auto waited = since(started);
    decision.waited = waited;
    if (decision.allowed || decision.retry_after > options.max_wait - waited) co_return decision;
    co_await sleep_for(loop_, decision.retry_after, options.stop);
  }
}

Task<void> LimiterCore::give_back(std::shared_ptr<LimiterCore> core, DecideRequest request,
                                  FracTime slot, std::int64_t den, std::int64_t version) {
  co_await core->backend_->cancel(std::move(request), slot, den, version);
}

Task<Decision> LimiterCore::acquire_by_reserving(DecideRequest request, AcquireOptions options) {
  const auto started = Clock::now();
  const std::int64_t max_wait = std::min(options.max_wait.count(), max_reservation_wait_us);
  // Why before reserving: a cancellation announced before our reply arrives is kept for us.
  WaiterRegistry::Watch watch = waiters_.watch(request);
  Reservation reservation = co_await backend_->reserve(request, max_wait);
  Decision decision = reservation.decision;
  if (!decision.allowed || reservation.wait_us == 0) {
    decision.waited = since(started);
    co_return decision;
  }

  WaiterRegistry::Waiter waiter;
  waiter.slot = reservation.slot;
  waiter.den = reservation.den;
  waiter.reserved_at_us = reservation.reserved_at_us;
  waiter.version = reservation.version;
  waiter.seen = reservation.version;
  waiter.wake = Clock::now() + std::chrono::microseconds(reservation.wait_us);
  watch.add(&waiter);

  // Why a guard: if the waiting task is destroyed, its reservation is still given back.
  struct GiveBackOnDestruction {
    LimiterCore& core;
    const DecideRequest& request;
    const WaiterRegistry::Waiter& waiter;
    bool armed = true;
    ~GiveBackOnDestruction() {
      if (!armed) return;
      // The limiter must outlive its calls; if it is already gone, there is nobody to tell.
      if (auto alive = core.weak_from_this().lock()) {
        spawn(core.loop_,
              give_back(std::move(alive), request, waiter.slot, waiter.den, waiter.version));
      }
    }
  } guard{*this, request, waiter};

  struct Forward {
    std::stop_source* target;
    void operator()() const noexcept { target->request_stop(); }
  };
  for (;;) {
    const auto now = Clock::now();
    if (now >= waiter.wake) break;
    std::stop_source wake_early;
    waiter.reschedule = &wake_early;
    std::stop_callback<Forward> forward(options.stop, Forward{&wake_early});
    bool woken = false;
    try {
      co_await sleep_for(loop_, std::chrono::ceil<std::chrono::microseconds>(waiter.wake - now),
                         wake_early.get_token());
    } catch (const Cancelled&) {
      woken = true;
    }
    waiter.reschedule = nullptr;
    if (woken && options.stop.stop_requested()) break;
  }
  guard.armed = false;
  if (options.stop.stop_requested() && Clock::now() < waiter.wake) {
    co_await backend_->cancel(request, waiter.slot, waiter.den, waiter.version);
    throw Cancelled("acquire cancelled while waiting; its reservation was given back");
  }
  decision.waited = since(started);
  decision.server_time_us = waiter.slot.ceil_us();
  co_return decision;
}

void LimiterCore::set_policy(Policy policy) {
  policy_ = CompiledPolicy::compile(std::move(policy));
}

}  // namespace redlimit::detail
