#pragma once
/// @file decider.hpp
/// Decider: answers ShouldRateLimit calls on one worker's loop, with one Limiter per
/// configured limit, made from the worker's Client.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include "rate_limit_call.hpp"
#include "redlimit/client.hpp"
#include "redlimit/limiter.hpp"

namespace redlimit_server {

/// A call that cannot be answered as it is (an empty domain, no descriptor): gRPC's
/// INVALID_ARGUMENT, HTTP's 400. Entries are taken as they come, empty ones too, as
/// envoyproxy/ratelimit takes them.
class InvalidCall : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// The names of envoyproxy/ratelimit's three response headers (its LIMIT_LIMIT_HEADER,
/// LIMIT_REMAINING_HEADER and LIMIT_RESET_HEADER).
struct LimitHeaders {
  std::string limit = "RateLimit-Limit";
  std::string remaining = "RateLimit-Remaining";
  std::string reset = "RateLimit-Reset";
};

/// What every answer adds besides the statuses.
struct DeciderOptions {
  /// The IETF RateLimit-Policy and RateLimit fields (and Retry-After when over the limit).
  bool ratelimit_headers = true;
  /// envoyproxy/ratelimit's three headers (its LIMIT_RESPONSE_HEADERS_ENABLED), as it writes
  /// them: the current limit, what is left of it, and the seconds to its window's end, of the
  /// last descriptor over its limit, else of the first with the fewest left.
  std::optional<LimitHeaders> limit_headers{};
  /// The first part of every Redis key (LimiterOptions::prefix).
  std::string prefix = "rl";
  /// The configured limits are followed in the central PolicyStore (publish_policies() writes
  /// them), so every replica enforces the limits written last; else each enforces its own
  /// configuration. A caller's override is always the caller's.
  bool central_policies = true;
  /// Called (on the worker's thread) when a limiter finds no limit in the central store (a
  /// Redis restart that lost it, a FLUSHALL): the server writes its limits again.
  std::function<void()> on_policy_missing{};
};

/// Answers calls under a configuration, each descriptor under the limit it matches
/// (descriptor_match.hpp). By default as envoyproxy/ratelimit answers: a fixed window aligned to
/// the unit, each descriptor on its own (a call over one descriptor's limit still counts against
/// the others), hits over a limit still counted (the window is full until its end). With a
/// domain's all_or_nothing, the descriptors are one decision (redlimit::try_acquire_all): a call
/// refused by one consumes nothing of the others.
///
/// Use on the Client's loop thread.
class Decider {
 public:
  Decider(redlimit::Client& client, std::shared_ptr<const RateLimitConfig> config,
          DeciderOptions options);

  /// The answer to `call`. Throws InvalidCall before any I/O; a Redis error the failure policy
  /// does not answer (a missing permission) is thrown.
  redlimit::Task<RateLimitAnswer> decide(RateLimitCall call);

  /// Answers under `config` from now on; a limit kept under the same name keeps its consumed
  /// state (Limiter::set_policy(), Carry::as_is; a follower of the central store: as stored).
  void replace_config(std::shared_ptr<const RateLimitConfig> config);

  /// Whether the configuration in force names `domain`.
  bool knows(std::string_view domain) const { return config_->domains.contains(domain); }

  /// The worker's Client.
  redlimit::Client& client() noexcept { return client_; }

  /// How many limiters it keeps now.
  std::size_t limiters() const noexcept { return limiters_.size(); }

 private:
  /// One descriptor as it will be decided.
  struct Applied;

  /// The limiter of `limit` (made on first use, under `domain`'s failure policy): a follower of
  /// the central store for a configured limit (with central_policies), else of `limit` itself.
  /// Shared: a call in flight keeps its limiter though a reload replaces it. A caller's limit
  /// (not `configured`) counts into no metrics, and only the most recently used
  /// `callers_limiters` of them are kept: each rate a caller chooses is a limiter, and a metrics
  /// series per rate would grow without end.
  std::shared_ptr<redlimit::Limiter> limiter_for(const LimitConfig& limit,
                                                 const DomainConfig& domain, bool configured);
  redlimit::Task<void> decide_one(Applied& applied, DescriptorStatus& status);
  redlimit::Task<void> decide_together(std::vector<Applied>& applied,
                                       std::vector<DescriptorStatus>& statuses);
  /// The IETF RateLimit fields (ratelimit_headers), of the binding descriptor.
  void add_headers(const std::vector<Applied>& applied, RateLimitAnswer& answer) const;
  /// envoyproxy/ratelimit's headers (limit_headers), of the descriptor it picks.
  void add_limit_headers(const std::vector<Applied>& applied, RateLimitAnswer& answer) const;

  redlimit::Client& client_;
  std::shared_ptr<const RateLimitConfig> config_;
  DeciderOptions options_;
  struct Made {
    std::shared_ptr<redlimit::Limiter> limiter;
    LimitConfig limit;         ///< what it enforces
    FailureConfig on_failure;  ///< its domain's, when it was made
    bool callers = false;      ///< made for a caller's limit
    std::uint64_t used = 0;    ///< uses_ at its last use
  };
  /// Drops the caller's limiter used least recently.
  void drop_least_recent_callers();
  /// By limiter name: a configured limit's full key, or an override's domain and rate.
  std::map<std::string, Made, std::less<>> limiters_;
  std::uint64_t uses_ = 0;            ///< limiter_for() calls so far
  std::size_t callers_limiters_ = 0;  ///< of limiters_, those made for a caller's limit
};

}  // namespace redlimit_server
