#include "limiter/limiter_core.hpp"

#include "limiter/key_format.hpp"
#include "redlimit/errors.hpp"

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

void LimiterCore::set_policy(Policy policy) {
  policy_ = CompiledPolicy::compile(std::move(policy));
}

}  // namespace redlimit::detail
