#include "redis/circuit_breaker.hpp"

#include <algorithm>
#include <cstddef>

#include "metrics/instruments.hpp"

namespace redlimit::detail {
namespace {

Gauge* gauge_of(RedisMetrics* metrics, BreakerState state) noexcept {
  return metrics == nullptr ? nullptr : &metrics->breakers[static_cast<std::size_t>(state)];
}

}  // namespace

CircuitBreaker::CircuitBreaker(Settings settings, RedisMetrics* metrics)
    : settings_(settings), metrics_(metrics) {
  if (Gauge* gauge = gauge_of(metrics_, state_)) gauge->add(1);
}

CircuitBreaker::~CircuitBreaker() {
  if (Gauge* gauge = gauge_of(metrics_, state_)) gauge->add(-1);
}

void CircuitBreaker::enter(State next) noexcept {
  if (next == state_) return;
  if (Gauge* gauge = gauge_of(metrics_, state_)) gauge->add(-1);
  if (Gauge* gauge = gauge_of(metrics_, next)) gauge->add(1);
  state_ = next;
}

bool CircuitBreaker::allow(Clock::time_point now) {
  switch (state_) {
    case State::closed:
      return true;
    case State::open:
      if (now < open_until_) return false;
      enter(State::half_open);  // this call is the probe
      probe_sent_ = now;
      return true;
    case State::half_open:
      if (now - probe_sent_ < settings_.probe_timeout) return false;  // the probe is under way
      probe_sent_ = now;  // the probe never reported: this call probes again
      return true;
  }
  return true;
}

void CircuitBreaker::success() {
  enter(State::closed);
  failures_ = 0;
  open_for_ = {};
}

void CircuitBreaker::failure(Clock::time_point now) {
  ++failures_;
  if (state_ == State::closed && failures_ < settings_.failures_to_open) return;
  open_for_ = open_for_ == Clock::duration{}
                  ? Clock::duration(settings_.open_min)
                  : std::min<Clock::duration>(open_for_ * 2, settings_.open_max);
  enter(State::open);
  open_until_ = now + open_for_;
}

CircuitBreaker::Clock::duration CircuitBreaker::retry_in(Clock::time_point now) const {
  if (state_ == State::closed) return {};
  return std::max<Clock::duration>(open_until_ - now, Clock::duration{});
}

}  // namespace redlimit::detail
