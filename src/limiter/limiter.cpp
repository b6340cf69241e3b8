#include "redlimit/limiter.hpp"

#include "limiter/local_backend.hpp"
#include "limiter/policy_enforcer.hpp"
#include "limiter/policy_gauge.hpp"
#include "limiter/redis_backend.hpp"
#include "redlimit/client.hpp"
#include "runtime/logger.hpp"

namespace redlimit {

namespace {

/// The gauge of a limiter's policy where its calls count: `options.metrics`, else `client`'s.
std::shared_ptr<const detail::PolicyGauge> gauge_of(const LimiterOptions& options,
                                                    const std::shared_ptr<Metrics>& client) {
  auto metrics = options.metrics ? options.metrics : client;
  return std::make_shared<const detail::PolicyGauge>(std::move(metrics), options.name);
}

}  // namespace

// Why the gauge shows the policy after the enforcer is made: the options are valid then, so no
// invalid name gets metrics.
Limiter::Limiter(Client& client, Policy policy, LimiterOptions options)
    : gauge_(gauge_of(options, client.metrics())),
      enforcer_(std::make_shared<detail::PolicyEnforcer>(
          client.loop(), client.shared_dispatcher(), client.stats_publisher(),
          std::make_unique<detail::RedisBackend>(client.dispatcher()), detail::fixed_policy(policy),
          std::move(options), client.dispatcher().logger())) {
  gauge_->show(*shared_policy());
}

// Why `options` is copied, not moved, into the enforcer: the arguments of one call are evaluated
// in no set order, and a move could empty options.name before the source reads it.
Limiter::Limiter(Client& client, LimiterOptions options)
    : gauge_(gauge_of(options, client.metrics())),
      enforcer_(std::make_shared<detail::PolicyEnforcer>(
          client.loop(), client.shared_dispatcher(), client.stats_publisher(),
          std::make_unique<detail::RedisBackend>(client.dispatcher()),
          detail::stored_policies(gauge_->follow(std::make_shared<detail::PolicyFollower>(
                                      client.shared_dispatcher(), options.prefix, options.name,
                                      options.policy_refresh)),
                                  options.name),
          options, client.dispatcher().logger())) {}

Limiter::Limiter(uv_loop_t* loop, Policy policy, LimiterOptions options)
    : gauge_(gauge_of(options, nullptr)),
      enforcer_(std::make_shared<detail::PolicyEnforcer>(
          loop, nullptr, nullptr, std::make_unique<detail::LocalBackend>(),
          detail::fixed_policy(policy), std::move(options), detail::default_logger())) {
  gauge_->show(*shared_policy());
}

Limiter::~Limiter() = default;
Limiter::Limiter(Limiter&& other) noexcept = default;
Limiter& Limiter::operator=(Limiter&& other) noexcept = default;

Task<Decision> Limiter::try_acquire(std::string key, std::int64_t permits) {
  return enforcer_->try_acquire(std::move(key), permits);
}

Task<Decision> Limiter::try_acquire(Permits permits) {
  return enforcer_->try_acquire(enforcer_->options().name, permits.count());
}

// Why not coroutines: `options` may refer to a token that dies when this returns (a
// `source.get_token()` temporary); the coroutine gets its own copy now.
Task<Decision> Limiter::acquire(std::string key, std::int64_t permits, AcquireOptions options) {
  return detail::PolicyEnforcer::acquire(enforcer_, std::move(key), permits,
                                         detail::OwnedAcquireOptions(options));
}

Task<Decision> Limiter::acquire(Permits permits, AcquireOptions options) {
  return acquire(enforcer_->options().name, permits.count(), options);
}

// Why the thread check first: start() puts a timer on the loop, which only its thread may do.
void Limiter::try_acquire(std::string key, std::int64_t permits,
                          std::function<void(Result<Decision>)> done) {
  enforcer_->check_thread();
  start(enforcer_->loop(), enforcer_->try_acquire(std::move(key), permits), std::move(done),
        enforcer_);
}

void Limiter::acquire(std::string key, std::int64_t permits, AcquireOptions options,
                      std::function<void(Result<Decision>)> done) {
  enforcer_->check_thread();
  start(enforcer_->loop(), acquire(std::move(key), permits, options), std::move(done), enforcer_);
}

void Limiter::try_acquire(Permits permits, std::function<void(Result<Decision>)> done) {
  try_acquire(enforcer_->options().name, permits.count(), std::move(done));
}

void Limiter::acquire(Permits permits, AcquireOptions options,
                      std::function<void(Result<Decision>)> done) {
  acquire(enforcer_->options().name, permits.count(), options, std::move(done));
}

Task<Decision> Limiter::peek(std::string key) {
  return enforcer_->peek(std::move(key));
}

Task<std::vector<LimitState>> Limiter::inspect(std::string key) {
  return detail::PolicyEnforcer::inspect(enforcer_, std::move(key));
}

Task<void> Limiter::reset(std::string key) {
  return detail::PolicyEnforcer::reset(enforcer_, std::move(key));
}

Task<void> Limiter::refund(std::string key, std::int64_t permits) {
  return detail::PolicyEnforcer::adjust(enforcer_, std::move(key), detail::Adjustment::refund,
                                        permits);
}

Task<void> Limiter::penalize(std::string key, std::int64_t permits) {
  return detail::PolicyEnforcer::adjust(enforcer_, std::move(key), detail::Adjustment::penalize,
                                        permits);
}

Task<void> Limiter::block(std::string key, std::chrono::microseconds duration) {
  return detail::PolicyEnforcer::adjust(enforcer_, std::move(key), detail::Adjustment::block,
                                        duration.count());
}

void Limiter::set_policy(Policy policy, Carry carry) {
  enforcer_->set_policy(std::move(policy), carry);
  gauge_->show(*shared_policy());
}

Policy Limiter::policy() const {
  return *shared_policy();
}

std::shared_ptr<const Policy> Limiter::shared_policy() const {
  static const auto none = std::make_shared<const Policy>();
  std::shared_ptr<const detail::CompiledPolicy> named = enforcer_->named_policy();
  if (!named) return none;
  const Policy* policy = &named->policy();
  // Why an alias: the compiled policy owns the Policy, and lives as long as the pointer.
  return std::shared_ptr<const Policy>(std::move(named), policy);
}

}  // namespace redlimit
