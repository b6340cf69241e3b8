#include "decider.hpp"

#include <openssl/sha.h>

#include <algorithm>
#include <array>
#include <limits>

#include "redlimit/errors.hpp"
#include "redlimit/metrics.hpp"
#include "redlimit/ratelimit_fields.hpp"
#include "redlimit/task_group.hpp"

namespace redlimit_server {
namespace {

using std::chrono::microseconds;

/// The limiters of callers' limits (overrides) a Decider keeps at most.
constexpr std::size_t callers_limiters = 256;

/// The longest key a Limiter takes (InvalidArgument beyond).
constexpr std::size_t longest_limiter_key = 65536;

/// `key` as `#sha256:<64 hex digits>`, which no key_of() text is (it has no '=').
std::string digest_key(const std::string& key) {
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
  SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), digest.data());
  constexpr char hex_digits[] = "0123456789abcdef";
  std::string out = "#sha256:";
  for (const unsigned char byte : digest) {
    out += hex_digits[byte >> 4];
    out += hex_digits[byte & 0xF];
  }
  return out;
}

/// A descriptor's entries as a limiter key: `key=value` pairs joined by '|', with '\', '|' and
/// '=' escaped, so that two descriptors share a key only when their entries are the same (no
/// entries: "|"). Why a digest past a limiter's longest key: a header value of any length
/// (Envoy allows 60 KiB, which escaping may double) is counted; refused, it would fail the
/// whole call, which Envoy lets through by default, and every limit of the call with it.
std::string key_of(const std::vector<DescriptorEntry>& entries) {
  std::string key;
  const auto append = [&key](const std::string& text) {
    for (const char c : text) {
      if (c == '\\' || c == '|' || c == '=') key += '\\';
      key += c;
    }
  };
  for (const DescriptorEntry& entry : entries) {
    if (!key.empty()) key += '|';
    append(entry.key);
    key += '=';
    append(entry.value);
  }
  // Why '|' for no entries: a key is not empty, and an entry writes at least its '='.
  if (key.empty()) return "|";
  return key.size() > longest_limiter_key ? digest_key(key) : key;
}

/// The most permits one call of `limit` can take.
std::int64_t capacity(const LimitConfig& limit) {
  const redlimit::Limit enforced = limit.limit();
  const bool bucket = enforced.algorithm == redlimit::Algorithm::gcra ||
                      enforced.algorithm == redlimit::Algorithm::token_bucket ||
                      enforced.algorithm == redlimit::Algorithm::leaky_bucket;
  return bucket && enforced.burst > 0 ? enforced.burst : enforced.rate.permits;
}

/// Whether `limit` is answered as envoyproxy/ratelimit answers: hits over the limit still count.
bool counts_over_limit_hits(const LimitConfig& limit) {
  return limit.algorithm == redlimit::Algorithm::fixed_window;
}

std::uint32_t clamp_remaining(std::int64_t remaining) {
  return static_cast<std::uint32_t>(
      std::clamp<std::int64_t>(remaining, 0, std::numeric_limits<std::uint32_t>::max()));
}

/// Until the end of the window of `unit` holding now, by the system clock: a limit of 0
/// requests, decided without Redis.
microseconds until_window_end(TimeUnit unit) {
  const auto now =
      std::chrono::duration_cast<microseconds>(std::chrono::system_clock::now().time_since_epoch());
  const microseconds length = unit_length(unit);
  return length - now % length;
}

/// `configured` as a limiter of `policy` (its policy in force) enforces it: a follower of the
/// central store may already enforce a limit another replica wrote (its policy read last), which
/// the answer tells. That one is made in `differing`; else `configured` itself is the answer.
const LimitConfig* enforced_by(const LimitConfig& configured, const redlimit::Policy& policy,
                               LimitConfig& differing) {
  if (policy.limits.size() != 1 || policy.limits.front() == configured.limit()) return &configured;
  const redlimit::Limit& limit = policy.limits.front();
  differing = configured;
  differing.algorithm = limit.algorithm;
  differing.burst = limit.burst;
  differing.requests_per_unit = static_cast<std::uint32_t>(
      std::clamp<std::int64_t>(limit.rate.permits, 0, std::numeric_limits<std::uint32_t>::max()));
  for (const TimeUnit unit : {TimeUnit::second, TimeUnit::minute, TimeUnit::hour, TimeUnit::day,
                              TimeUnit::month, TimeUnit::year}) {
    if (limit.rate.period == unit_length(unit)) differing.unit = unit;
  }
  return &differing;
}

/// Takes `permits` of `key` without asking; an error leaves the decision made as it was (the
/// hits then go uncounted: under-counting, never a refusal turned into an admission).
redlimit::Task<void> penalize_quietly(redlimit::Limiter& limiter, const std::string& key,
                                      std::int64_t permits) {
  try {
    co_await limiter.penalize(key, permits);
  } catch (const redlimit::Error&) {
  }
}

/// What a domain's failure policy answers when its limit is not in the central store (`missing`:
/// Redis answered without it, having lost it, and the server writes it again; else Redis has not
/// answered yet): allow (also for local, whose share needs a limit read at least once) or deny.
/// Without one, the call fails while Redis does not answer; a limit Redis lost is allowed, as
/// envoyproxy/ratelimit counts afresh on a Redis that lost its counts.
Code answer_on_failure(const FailureConfig& on_failure, bool missing) {
  if (!on_failure.kind && !missing)
    throw redlimit::Unavailable("Redis has not answered since the server started", false);
  return on_failure.kind == redlimit::FailurePolicy::fail_closed ? Code::over_limit : Code::ok;
}

/// Fails the call when `decision` is a failure policy's answer and its domain has none
/// (FailureConfig::kind): the limiter answered so only because Redis could not.
void fail_unless_answered(const redlimit::Decision& decision, const FailureConfig& on_failure) {
  const bool failed = decision.source == redlimit::Source::fail_open ||
                      decision.source == redlimit::Source::fail_closed;
  if (failed && !on_failure.kind)
    throw redlimit::Unavailable("Redis could not answer in time", true);
}

}  // namespace

struct Decider::Applied {
  const LimitConfig* limit = nullptr;  ///< null: no limit applies
  LimitConfig overridden;              ///< the caller's limit, when it gave one
  LimitConfig enforced;  ///< the limit its limiter enforces now, when it is not the configured one
  std::string key;
  std::int64_t hits = 1;
  std::shared_ptr<redlimit::Limiter> limiter;  ///< null: decided without Redis
  bool unread = false;  ///< its limiter follows the store and had not read its policy yet
  std::optional<redlimit::Decision> decision;
  FailureConfig on_failure;  ///< the domain's
  /// Its hits (with those of the same key in its call, all or nothing) exceed what its limit
  /// holds: no wait lets them in.
  bool never_fits = false;
};

Decider::Decider(redlimit::Client& client, std::shared_ptr<const RateLimitConfig> config,
                 DeciderOptions options)
    : client_(client), config_(std::move(config)), options_(std::move(options)) {}

void Decider::replace_config(std::shared_ptr<const RateLimitConfig> config) {
  config_ = std::move(config);
}

std::shared_ptr<redlimit::Limiter> Decider::limiter_for(const LimitConfig& limit,
                                                        const DomainConfig& domain,
                                                        bool configured) {
  const bool follows = configured && options_.central_policies;
  const std::string& name = limit.full_key;
  if (const auto it = limiters_.find(name); it != limiters_.end()) {
    Made& made = it->second;
    made.used = ++uses_;
    if (made.limit.shadow_mode == limit.shadow_mode && made.on_failure == domain.on_failure) {
      // Why only when it changed: a copy of the limit per call is a noticeable part of its CPU.
      if (!(made.limit.limit() == limit.limit())) {
        // Why set_policy(): the keys' consumed state carries over to the new limit.
        if (!follows)
          made.limiter->set_policy(redlimit::Policy::of(limit.limit()), redlimit::Carry::as_is);
        made.limit = limit;
      }
      return made.limiter;
    }
    if (made.callers) --callers_limiters_;
    limiters_.erase(it);
  }
  redlimit::LimiterOptions options{.name = name, .prefix = options_.prefix};
  // Why fail_closed without a failure policy: its answers fail the call (fail_unless_answered()).
  options.on_failure = {
      .kind = domain.on_failure.kind.value_or(redlimit::FailurePolicy::fail_closed),
      .local_share = domain.on_failure.kind == redlimit::FailurePolicy::local_fallback
                         ? domain.on_failure.local_share
                         : 1.0};
  options.shadow = limit.shadow_mode;
  if (!configured) {
    options.metrics = std::make_shared<redlimit::Metrics>();
    if (callers_limiters_ == callers_limiters) drop_least_recent_callers();
    ++callers_limiters_;
  }
  Made made{follows ? std::make_shared<redlimit::Limiter>(client_, std::move(options))
                    : std::make_shared<redlimit::Limiter>(
                          client_, redlimit::Policy::of(limit.limit()), std::move(options)),
            limit, domain.on_failure, !configured, ++uses_};
  std::shared_ptr<redlimit::Limiter> limiter = made.limiter;
  limiters_.emplace(name, std::move(made));
  return limiter;
}

void Decider::drop_least_recent_callers() {
  auto oldest = limiters_.end();
  for (auto it = limiters_.begin(); it != limiters_.end(); ++it) {
    if (it->second.callers && (oldest == limiters_.end() || it->second.used < oldest->second.used))
      oldest = it;
  }
  if (oldest == limiters_.end()) return;
  limiters_.erase(oldest);
  --callers_limiters_;
}

redlimit::Task<RateLimitAnswer> Decider::decide(RateLimitCall call) {
  if (call.domain.empty()) throw InvalidCall("the rate limit domain must not be empty");
  if (call.descriptors.empty())
    throw InvalidCall("the rate limit descriptor list must not be empty");
  // Why held: a reload while this call waits must not free the limits it decides under.
  const std::shared_ptr<const RateLimitConfig> config = config_;
  const auto found = config->domains.find(call.domain);
  std::vector<std::optional<MatchedLimit>> matched;
  // Why none for a descriptor with the caller's limit: as envoyproxy/ratelimit's, that limit is
  // one of its own, which replaces nothing (and has no name to be replaced by).
  for (const DescriptorCall& descriptor : call.descriptors) {
    matched.push_back(descriptor.limit ? std::nullopt
                                       : match_limit(*config, call.domain, descriptor.entries));
  }
  apply_replaces(matched);

  std::vector<Applied> applied(call.descriptors.size());
  for (std::size_t i = 0; i < applied.size(); ++i) {
    const DescriptorCall& descriptor = call.descriptors[i];
    Applied& one = applied[i];
    one.key = key_of(descriptor.entries);
    one.hits = static_cast<std::int64_t>(std::min<std::uint64_t>(
        descriptor.hits_addend ? *descriptor.hits_addend
                               : std::max<std::uint32_t>(call.hits_addend, 1),
        std::numeric_limits<std::uint32_t>::max()));
    if (found == config->domains.end()) continue;
    one.on_failure = found->second.on_failure;
    if (descriptor.limit) {
      one.overridden.requests_per_unit = descriptor.limit->requests_per_unit;
      one.overridden.unit = descriptor.limit->unit;
      // Why named by the domain and the rate, not the entries: the key carries the entries,
      // and a name per value would be a limiter (and a metrics series) per caller.
      one.overridden.full_key = limit_name(name_part(call.domain) + "#" +
                                           std::to_string(descriptor.limit->requests_per_unit) +
                                           "/" + std::string(to_string(descriptor.limit->unit)));
      one.limit = &one.overridden;
    } else if (matched[i]) {
      one.limit = matched[i]->limit;
    }
    if (one.limit != nullptr && !one.limit->unlimited && one.limit->requests_per_unit > 0) {
      one.limiter = limiter_for(*one.limit, found->second, !descriptor.limit);
      // Why shared, not policy(): a copy of the policy per call is a noticeable part of its CPU.
      const std::shared_ptr<const redlimit::Policy> policy = one.limiter->shared_policy();
      one.unread = policy->limits.empty();
      one.limit = enforced_by(*one.limit, *policy, one.enforced);
    }
  }

  RateLimitAnswer answer;
  answer.statuses.resize(applied.size());
  if (found != config->domains.end() && found->second.all_or_nothing) {
    co_await decide_together(applied, answer.statuses);
  } else if (applied.size() == 1) {
    // Why apart: most calls have one descriptor, which needs no group of its own.
    co_await decide_one(applied.front(), answer.statuses.front());
  } else {
    redlimit::TaskGroup group;
    for (std::size_t i = 0; i < applied.size(); ++i)
      group.add(decide_one(applied[i], answer.statuses[i]));
    co_await group.join();
  }
  // Why again: a follower's first call reads its policy, which the call was decided under.
  for (std::size_t i = 0; i < applied.size(); ++i) {
    Applied& one = applied[i];
    std::optional<CurrentLimit>& told = answer.statuses[i].current_limit;
    if (!one.unread || !told) continue;
    one.limit = enforced_by(*one.limit, *one.limiter->shared_policy(), one.enforced);
    told->requests_per_unit = one.limit->requests_per_unit;
    told->unit = one.limit->unit;
  }
  for (std::size_t i = 0; i < applied.size(); ++i) {
    DescriptorStatus& status = answer.statuses[i];
    const LimitConfig* limit = applied[i].limit;
    if (status.code == Code::over_limit && !(limit != nullptr && limit->shadow_mode))
      answer.overall_code = Code::over_limit;
    // Why whole seconds: envoyproxy/ratelimit tells a fixed window's reset so, and Envoy's
    // x-ratelimit-reset reads the seconds alone (0 for most of a window of one second).
    if (limit != nullptr && status.current_limit && counts_over_limit_hits(*limit)) {
      status.duration_until_reset =
          std::chrono::ceil<std::chrono::seconds>(status.duration_until_reset);
    }
  }
  add_headers(applied, answer);
  if (options_.limit_headers) add_limit_headers(applied, answer);
  co_return answer;
}

redlimit::Task<void> Decider::decide_one(Applied& applied, DescriptorStatus& status) {
  const LimitConfig* limit = applied.limit;
  status.code = Code::ok;
  if (limit == nullptr) co_return;
  if (limit->unlimited) {
    status.limit_remaining = std::numeric_limits<std::uint32_t>::max();
    co_return;
  }
  status.current_limit = CurrentLimit{
      .name = limit->name, .requests_per_unit = limit->requests_per_unit, .unit = limit->unit};
  if (applied.limiter == nullptr) {  // 0 requests per unit: every hit is over the limit
    status.code = limit->shadow_mode ? Code::ok : Code::over_limit;
    status.duration_until_reset = until_window_end(limit->unit);
    co_return;
  }
  redlimit::Limiter& limiter = *applied.limiter;
  const bool over_capacity = applied.hits > capacity(*limit);
  applied.never_fits = over_capacity;
  redlimit::Decision decision;
  std::optional<bool> missing;  ///< a follower found no limit: whether Redis answered so
  try {
    if (applied.hits == 0) {
      decision = co_await limiter.peek(applied.key);  // over when no permit is left
      if (limit->shadow_mode && !decision.allowed) {  // observed, as a take would be
        decision.allowed = true;
        decision.shadow_denied = true;
      }
    } else if (over_capacity) {
      decision = co_await limiter.peek(applied.key);
      decision.allowed = limit->shadow_mode;  // over the limit, enforced only if not shadow
      decision.shadow_denied = limit->shadow_mode;
      decision.remaining = 0;
    } else {
      decision = co_await limiter.try_acquire(applied.key, applied.hits);
    }
  } catch (const redlimit::PolicyNotFound& e) {
    missing = e.store_read();
  }
  if (missing) {
    if (options_.on_policy_missing) options_.on_policy_missing();
    status.code = answer_on_failure(applied.on_failure, *missing);
    co_return;
  }
  fail_unless_answered(decision, applied.on_failure);
  const bool refused = !decision.allowed || decision.shadow_denied;
  if (refused && applied.hits > 0 && counts_over_limit_hits(*limit) &&
      decision.source == redlimit::Source::redis) {
    // As envoyproxy/ratelimit counts them: the window is full until its end.
    co_await penalize_quietly(limiter, applied.key,
                              std::min<std::int64_t>(applied.hits, capacity(*limit)));
    if (over_capacity) {
      // Why from the Redis time: the peek saw the key as it was (idle perhaps: no reset); the
      // hits now fill the aligned window holding that time until its end, the answer's reset.
      const std::int64_t period = limit->limit().rate.period.count();
      decision.reset_after = decision.retry_after =
          microseconds(period - decision.server_time_us % period);
    }
  }
  if (decision.reset_after == microseconds::zero() && counts_over_limit_hits(*limit) &&
      decision.source == redlimit::Source::redis) {
    // A window never used has nothing to reset; envoyproxy/ratelimit tells the end of the
    // aligned window holding now all the same.
    const std::int64_t period = limit->limit().rate.period.count();
    decision.reset_after = microseconds(period - decision.server_time_us % period);
  }
  // Why shadow-denied is OK: a shadow limit is observed, never enforced (as
  // envoyproxy/ratelimit answers it).
  status.code = decision.allowed ? Code::ok : Code::over_limit;
  status.limit_remaining = status.code == Code::ok ? clamp_remaining(decision.remaining) : 0;
  status.duration_until_reset = decision.reset_after;
  applied.decision = decision;
}

redlimit::Task<void> Decider::decide_together(std::vector<Applied>& applied,
                                              std::vector<DescriptorStatus>& statuses) {
  // What cannot be one decision is decided on its own first: no limit, an unlimited one, a
  // shadow one (observed, never enforced), 0 requests, more hits than the limit holds.
  std::vector<std::size_t> together;
  std::vector<std::size_t> alone;
  {
    redlimit::TaskGroup deciding;
    for (std::size_t i = 0; i < applied.size(); ++i) {
      const Applied& one = applied[i];
      if (one.limiter != nullptr && !one.limit->shadow_mode && one.hits >= 1 &&
          one.hits <= capacity(*one.limit)) {
        together.push_back(i);
      } else {
        alone.push_back(i);
        deciding.add(decide_one(applied[i], statuses[i]));
      }
    }
    co_await deciding.join();
  }
  // One of them over its limit (no requests, more hits than it holds, or a call of no hits on
  // a full one; a shadow one is never over) refuses the call, whatever the others hold.
  bool refused = std::ranges::any_of(
      alone, [&statuses](std::size_t i) { return statuses[i].code == Code::over_limit; });
  if (together.empty()) co_return;
  // Why merged: one decision takes each key once, and a descriptor sent twice (Envoy may) counts
  // its hits twice, as envoyproxy/ratelimit counts them.
  std::vector<redlimit::Claim> claims;
  std::vector<std::size_t> claim_of;  ///< per place in `together`: its claim
  for (const std::size_t i : together) {
    const Applied& one = applied[i];
    const auto same = std::find_if(claims.begin(), claims.end(), [&one](const redlimit::Claim& c) {
      return c.limiter == one.limiter.get() && c.key == one.key;
    });
    claim_of.push_back(static_cast<std::size_t>(same - claims.begin()));
    if (same == claims.end()) {
      claims.push_back({one.limiter.get(), one.key, one.hits});
    } else {
      same->permits += one.hits;
    }
  }
  // A key claimed for more hits than its limit holds is over it, whatever the others hold.
  std::vector<bool> over_capacity(claims.size());
  for (std::size_t k = 0; k < together.size(); ++k) {
    const std::size_t c = claim_of[k];
    over_capacity[c] = claims[c].permits > capacity(*applied[together[k]].limit);
    refused = refused || over_capacity[c];
  }
  std::optional<redlimit::Decision> decision;
  std::optional<bool> missing;  ///< followers found no limits: whether Redis answered so
  try {
    if (!refused) decision = co_await redlimit::try_acquire_all(claims);
  } catch (const redlimit::PolicyNotFound& e) {
    missing = e.store_read();
  }
  if (missing) {
    if (options_.on_policy_missing) options_.on_policy_missing();
    for (const std::size_t i : together) {
      statuses[i].code = answer_on_failure(applied[i].on_failure, *missing);
      statuses[i].current_limit =
          CurrentLimit{.name = applied[i].limit->name,
                       .requests_per_unit = applied[i].limit->requests_per_unit,
                       .unit = applied[i].limit->unit};
    }
    co_return;
  }
  if (decision) fail_unless_answered(*decision, applied[together.front()].on_failure);
  // Why a peek of each: one decision over the claims tells the binding claim's figures only.
  redlimit::TaskGroup peeks;
  const auto peek = [](Applied* one, DescriptorStatus* status) -> redlimit::Task<void> {
    try {
      const redlimit::Decision state = co_await one->limiter->peek(one->key);
      status->limit_remaining = status->code == Code::ok ? clamp_remaining(state.remaining) : 0;
      status->duration_until_reset = state.reset_after;
      one->decision = state;
    } catch (const redlimit::Error&) {
      // The status stays without its figures: the decision itself was made.
    }
  };
  for (std::size_t k = 0; k < together.size(); ++k) {
    Applied& one = applied[together[k]];
    DescriptorStatus& status = statuses[together[k]];
    status.current_limit = CurrentLimit{.name = one.limit->name,
                                        .requests_per_unit = one.limit->requests_per_unit,
                                        .unit = one.limit->unit};
    if (decision && !decision->allowed && decision->claim == claim_of[k]) {
      status.code = Code::over_limit;
      status.duration_until_reset = decision->reset_after;
      one.decision = decision;
    } else if (over_capacity[claim_of[k]]) {
      status.code = Code::over_limit;
      one.never_fits = true;
      peeks.add(peek(&one, &status));
    } else {
      status.code = Code::ok;
      peeks.add(peek(&one, &status));
    }
  }
  co_await peeks.join();
}

void Decider::add_limit_headers(const std::vector<Applied>& applied,
                                RateLimitAnswer& answer) const {
  const std::vector<DescriptorStatus>& statuses = answer.statuses;
  std::optional<std::size_t> picked;
  std::uint32_t fewest = std::numeric_limits<std::uint32_t>::max();
  for (std::size_t i = 0; i < statuses.size(); ++i) {
    if (!statuses[i].current_limit) continue;
    if (statuses[i].code == Code::over_limit) {
      picked = i;
      fewest = 0;
    } else if (statuses[i].limit_remaining < fewest) {
      picked = i;
      fewest = statuses[i].limit_remaining;
    }
  }
  if (!picked) return;
  const DescriptorStatus& status = statuses[*picked];
  // Why the window of its unit for a fixed window: envoyproxy/ratelimit tells that one, by the
  // clock; the other algorithms' reset is their own.
  const microseconds reset = counts_over_limit_hits(*applied[*picked].limit)
                                 ? until_window_end(status.current_limit->unit)
                                 : status.duration_until_reset;
  const LimitHeaders& names = *options_.limit_headers;
  answer.response_headers_to_add.push_back(
      {names.limit, std::to_string(status.current_limit->requests_per_unit)});
  answer.response_headers_to_add.push_back(
      {names.remaining, std::to_string(status.limit_remaining)});
  answer.response_headers_to_add.push_back(
      {names.reset, std::to_string(redlimit::whole_seconds_up(reset))});
}

void Decider::add_headers(const std::vector<Applied>& applied, RateLimitAnswer& answer) const {
  if (!options_.ratelimit_headers) return;
  std::vector<redlimit::QuotaPolicy> quotas;
  std::optional<redlimit::Decision> binding;
  bool binding_never_fits = false;  ///< more hits than its limit holds: no wait lets them in
  try {
    for (std::size_t i = 0; i < applied.size(); ++i) {
      const Applied& one = applied[i];
      if (!one.decision) continue;
      redlimit::Decision decision = *one.decision;
      decision.allowed = answer.statuses[i].code == Code::ok;
      decision.binding = quotas.size();
      quotas.push_back(redlimit::quota_policy(
          one.limit->name.empty() ? one.limit->full_key : one.limit->name, one.limit->limit()));
      const bool binds =
          !binding ||
          (decision.allowed ? binding->allowed && decision.remaining < binding->remaining
                            : binding->allowed || decision.retry_after > binding->retry_after);
      if (binds) {
        binding = decision;
        binding_never_fits = one.never_fits;
      }
    }
  } catch (const redlimit::InvalidArgument&) {
    return;  // a limit name the fields cannot carry (not printable ASCII): no fields
  }
  if (!binding) return;
  for (redlimit::HeaderField& field : redlimit::ratelimit_fields(quotas, *binding)) {
    // Why none for a call that never fits: "Retry-After: 0" would bring it back at once, and
    // again.
    if (binding_never_fits && field.name == "Retry-After") continue;
    answer.response_headers_to_add.push_back({std::move(field.name), std::move(field.value)});
  }
}

}  // namespace redlimit_server
