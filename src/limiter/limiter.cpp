#include "redlimit/limiter.hpp"

#include "limiter/limiter_core.hpp"
#include "limiter/local_backend.hpp"
#include "limiter/redis_backend.hpp"
#include "redlimit/client.hpp"
#include "runtime/logger.hpp"

namespace redlimit {

Limiter::Limiter(Client& client, Policy policy, LimiterOptions options)
    : core_(std::make_shared<detail::LimiterCore>(
          client.loop(), std::make_unique<detail::RedisBackend>(client.core()), std::move(policy),
          std::move(options), &client.core(), client.core().logger())) {}

Limiter::Limiter(uv_loop_t* loop, Policy policy, LimiterOptions options)
    : core_(std::make_shared<detail::LimiterCore>(loop, std::make_unique<detail::LocalBackend>(),
                                                  std::move(policy), std::move(options), nullptr,
                                                  detail::default_logger())) {}

Limiter::~Limiter() = default;

Task<Decision> Limiter::try_acquire(std::string key, std::int64_t permits) {
  return core_->try_acquire(std::move(key), permits);
}

Task<Decision> Limiter::try_acquire(std::int64_t permits) {
  return core_->try_acquire(core_->options().name, permits);
}

Task<Decision> Limiter::acquire(std::string key, std::int64_t permits, AcquireOptions options) {
  return core_->acquire(std::move(key), permits, std::move(options));
}

Task<Decision> Limiter::acquire(std::int64_t permits, AcquireOptions options) {
  return core_->acquire(core_->options().name, permits, std::move(options));
}

void Limiter::try_acquire(std::string key, std::int64_t permits,
                          std::function<void(Result<Decision>)> done) {
  start(core_->loop(), core_->try_acquire(std::move(key), permits), std::move(done), core_);
}

void Limiter::acquire(std::string key, std::int64_t permits, AcquireOptions options,
                      std::function<void(Result<Decision>)> done) {
  start(core_->loop(), core_->acquire(std::move(key), permits, std::move(options)), std::move(done),
        core_);
}

Task<Decision> Limiter::peek(std::string key) {
  return core_->peek(std::move(key));
}

Task<void> Limiter::reset(std::string key) {
  return core_->reset(std::move(key));
}

void Limiter::set_policy(Policy policy) {
  core_->set_policy(std::move(policy));
}

const Policy& Limiter::policy() const noexcept {
  return core_->policy();
}

}  // namespace redlimit
