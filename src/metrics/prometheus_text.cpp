#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <concepts>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "metrics/label_value.hpp"
#include "redlimit/metrics.hpp"

namespace redlimit {

std::string_view to_string(CallError error) noexcept {
  switch (error) {
    case CallError::invalid_argument:
      return "invalid_argument";
    case CallError::policy_not_found:
      return "policy_not_found";
    case CallError::unavailable:
      return "unavailable";
    case CallError::other:
      return "other";
  }
  return "other";
}

std::string_view to_string(RedisError error) noexcept {
  switch (error) {
    case RedisError::connection:
      return "connection";
    case RedisError::timeout:
      return "timeout";
    case RedisError::overloaded:
      return "overloaded";
    case RedisError::circuit_open:
      return "circuit_open";
    case RedisError::reply:
      return "reply";
    case RedisError::protocol:
      return "protocol";
  }
  return "reply";
}

std::string_view to_string(BreakerState state) noexcept {
  switch (state) {
    case BreakerState::closed:
      return "closed";
    case BreakerState::open:
      return "open";
    case BreakerState::half_open:
      return "half_open";
  }
  return "closed";
}

namespace {

using Label = std::pair<std::string_view, std::string_view>;

constexpr std::array<std::string_view, 2> results{"denied", "allowed"};  // by LimiterStats index

/// Builds the text: families (their HELP and TYPE lines) and samples, in the order written.
class Exposition {
 public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    line("# HELP ", name, " ", help);
    line("# TYPE ", name, " ", type);
  }

  template <class Value>
  void sample(std::string_view name, std::initializer_list<Label> labels, Value value) {
    out_ += name;
    if (labels.size() > 0) {
      char separator = '{';
      for (const auto& [label, label_value] : labels) {
        out_ += separator;
        out_ += label;
        out_ += "=\"";
        detail::append_label_value(out_, label_value);
        out_ += '"';
        separator = ',';
      }
      out_ += '}';
    }
    out_ += ' ';
    append_number(value);
    out_ += '\n';
  }

  /// The `_bucket`, `_sum` and `_count` samples of `histogram`, each with `label` if given
  /// (and `le` for the buckets). A `+Inf` bucket is added if `histogram` ends without one.
  void histogram(std::string_view name, std::optional<Label> label,
                 const HistogramSnapshot& histogram) {
    const std::string bucket = std::string(name) + "_bucket";
    const auto write_bucket = [&](const std::string& le, std::uint64_t count) {
      if (label) {
        sample(bucket, {*label, {"le", le}}, count);
      } else {
        sample(bucket, {{"le", le}}, count);
      }
    };
    const std::size_t buckets =
        std::min(histogram.upper_bounds.size(), histogram.cumulative_counts.size());
    for (std::size_t i = 0; i < buckets; ++i) {
      write_bucket(number_text(histogram.upper_bounds[i]), histogram.cumulative_counts[i]);
    }
    if (buckets == 0 || !std::isinf(histogram.upper_bounds[buckets - 1])) {
      write_bucket("+Inf", histogram.count);
    }
    const std::string sum = std::string(name) + "_sum";
    const std::string count = std::string(name) + "_count";
    if (label) {
      sample(sum, {*label}, histogram.sum);
      sample(count, {*label}, histogram.count);
    } else {
      sample(sum, {}, histogram.sum);
      sample(count, {}, histogram.count);
    }
  }

  std::string take() { return std::move(out_); }

  /// `value` as the format writes a float: the shortest text that reads back as it, or
  /// "+Inf", "-Inf", "NaN".
  static std::string number_text(double value) {
    if (std::isnan(value)) return "NaN";
    if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
    std::array<char, 32> text;
    const auto end = std::to_chars(text.data(), text.data() + text.size(), value).ptr;
    return std::string(text.data(), end);
  }

 private:
  template <class... Parts>
  void line(const Parts&... parts) {
    (out_.append(parts), ...);
    out_ += '\n';
  }

  template <std::integral Integer>
  void append_number(Integer value) {
    std::array<char, 24> text;
    const auto end = std::to_chars(text.data(), text.data() + text.size(), value).ptr;
    out_.append(text.data(), end);
  }
  void append_number(double value) { out_ += number_text(value); }

  std::string out_;
};

/// The policy in force per limiter name: its version, and each limit's rate as configured.
void policy_families(Exposition& text, const std::vector<LimiterStats>& limiters) {
  text.family("redlimit_policy_version", "gauge",
              "The version of the stored policy the limiters follow (0: a policy given in code).");
  for (const LimiterStats& limiter : limiters) {
    text.sample("redlimit_policy_version", {{"limiter", limiter.name}}, limiter.policy_version);
  }
  const auto each_limit = [&](std::string_view name, auto value_of) {
    for (const LimiterStats& limiter : limiters) {
      for (std::size_t i = 0; i < limiter.policy_limits.size(); ++i) {
        const Limit& limit = limiter.policy_limits[i];
        const std::string index = std::to_string(i);
        text.sample(name,
                    {{"limiter", limiter.name},
                     {"limit", index},
                     {"algorithm", to_string(limit.algorithm)}},
                    value_of(limit));
      }
    }
  };
  text.family("redlimit_policy_limit_permits", "gauge",
              "Each limit of the policy in force (by its index in the policy): the permits of "
              "its rate, per period.");
  each_limit("redlimit_policy_limit_permits",
             [](const Limit& limit) { return limit.rate.permits; });
  text.family("redlimit_policy_limit_period_seconds", "gauge",
              "Each limit of the policy in force (by its index in the policy): its rate's period.");
  each_limit("redlimit_policy_limit_period_seconds", [](const Limit& limit) {
    return std::chrono::duration<double>(limit.rate.period).count();
  });
}

void limiter_families(Exposition& text, const std::vector<LimiterStats>& limiters) {
  text.family("redlimit_decisions_total", "counter",
              "Decisions of try_acquire() and acquire(), by the limit's answer and where it came "
              "from.");
  for (const LimiterStats& limiter : limiters) {
    for (std::size_t allowed = 0; allowed < 2; ++allowed) {
      for (std::size_t source = 0; source < source_count; ++source) {
        text.sample("redlimit_decisions_total",
                    {{"limiter", limiter.name},
                     {"result", results[allowed]},
                     {"source", to_string(static_cast<Source>(source))}},
                    limiter.decisions[allowed][source]);
      }
    }
  }
  text.family("redlimit_shadow_denials_total", "counter",
              "Decisions the limit denied that shadow mode allowed.");
  for (const LimiterStats& limiter : limiters) {
    text.sample("redlimit_shadow_denials_total", {{"limiter", limiter.name}},
                limiter.shadow_denials);
  }
  text.family("redlimit_cancelled_total", "counter",
              "Calls ended by their stop token, or abandoned (their task destroyed) before they "
              "ended.");
  for (const LimiterStats& limiter : limiters) {
    text.sample("redlimit_cancelled_total", {{"limiter", limiter.name}}, limiter.cancelled);
  }
  text.family("redlimit_late_admissions_total", "counter",
              "Admissions answered later than the call's max_lateness allowed, not used.");
  for (const LimiterStats& limiter : limiters) {
    text.sample("redlimit_late_admissions_total", {{"limiter", limiter.name}},
                limiter.late_admissions);
  }
  text.family("redlimit_call_errors_total", "counter",
              "Limiter calls that ended with an error instead of a decision, by error.");
  for (const LimiterStats& limiter : limiters) {
    for (std::size_t error = 0; error < call_error_count; ++error) {
      text.sample("redlimit_call_errors_total",
                  {{"limiter", limiter.name}, {"error", to_string(static_cast<CallError>(error))}},
                  limiter.errors[error]);
    }
  }
  text.family("redlimit_wait_seconds", "histogram",
              "Time from each acquire() call to its decision (0 for one that did not wait).");
  for (const LimiterStats& limiter : limiters) {
    text.histogram("redlimit_wait_seconds", Label{"limiter", limiter.name}, limiter.wait_seconds);
  }
  text.family("redlimit_calls_in_flight", "gauge", "try_acquire() and acquire() calls under way.");
  for (const LimiterStats& limiter : limiters) {
    text.sample("redlimit_calls_in_flight", {{"limiter", limiter.name}}, limiter.in_flight);
  }
  text.family("redlimit_waiters", "gauge", "acquire() calls suspended, waiting for their permits.");
  for (const LimiterStats& limiter : limiters) {
    text.sample("redlimit_waiters", {{"limiter", limiter.name}}, limiter.waiters);
  }
  policy_families(text, limiters);
}

void redis_families(Exposition& text, const RedisStats& redis) {
  text.family("redlimit_redis_round_trips_total", "counter",
              "Commands and script calls written to Redis (a batch of coalesced calls counts "
              "once).");
  text.sample("redlimit_redis_round_trips_total", {}, redis.round_trips);
  text.family("redlimit_redis_errors_total", "counter",
              "Redis commands and script calls that failed, by the error their caller got.");
  for (std::size_t error = 0; error < redis_error_count; ++error) {
    text.sample("redlimit_redis_errors_total",
                {{"type", to_string(static_cast<RedisError>(error))}}, redis.errors[error]);
  }
  text.family("redlimit_redis_reconnects_total", "counter",
              "Redis connections established again after one was lost or failed.");
  text.sample("redlimit_redis_reconnects_total", {}, redis.reconnects);
  text.family(
      "redlimit_redis_scripts_loaded_total", "counter",
      "Scripts sent with their source (EVAL): first use on a connection, or after NOSCRIPT.");
  text.sample("redlimit_redis_scripts_loaded_total", {}, redis.scripts_loaded);
  text.family("redlimit_redis_replica_shortfalls_total", "counter",
              "Script calls whose writes too few replicas acknowledged in time (WAIT).");
  text.sample("redlimit_redis_replica_shortfalls_total", {}, redis.replica_shortfalls);
  text.family("redlimit_redis_batch_size", "histogram",
              "Limiter calls per script call sent to Redis (1 for a call sent alone).");
  text.histogram("redlimit_redis_batch_size", std::nullopt, redis.batch_size);
  text.family("redlimit_redis_commands_in_flight", "gauge",
              "Redis commands waiting for a connection or a reply.");
  text.sample("redlimit_redis_commands_in_flight", {}, redis.commands_in_flight);
  text.family("redlimit_redis_circuit_breakers", "gauge",
              "Redis servers whose circuit breaker is in each state.");
  for (std::size_t state = 0; state < redis.breakers.size(); ++state) {
    text.sample("redlimit_redis_circuit_breakers",
                {{"state", to_string(static_cast<BreakerState>(state))}}, redis.breakers[state]);
  }
}

void add_histogram(HistogramSnapshot& sum, const HistogramSnapshot& more) {
  for (std::size_t i = 0; i < sum.cumulative_counts.size() && i < more.cumulative_counts.size();
       ++i) {
    sum.cumulative_counts[i] += more.cumulative_counts[i];
  }
  sum.count += more.count;
  sum.sum += more.sum;
}

void add_stats(LimiterStats& sum, const LimiterStats& more) {
  for (std::size_t allowed = 0; allowed < 2; ++allowed) {
    for (std::size_t source = 0; source < source_count; ++source) {
      sum.decisions[allowed][source] += more.decisions[allowed][source];
    }
  }
  sum.shadow_denials += more.shadow_denials;
  sum.cancelled += more.cancelled;
  sum.late_admissions += more.late_admissions;
  for (std::size_t error = 0; error < call_error_count; ++error)
    sum.errors[error] += more.errors[error];
  add_histogram(sum.wait_seconds, more.wait_seconds);
  sum.in_flight += more.in_flight;
  sum.waiters += more.waiters;
}

/// `limiters`, those whose names are written as the same label value (names whose bytes that
/// are not UTF-8 differ) added up under the first. Why: two series with the same labels make
/// Prometheus refuse the whole scrape.
std::vector<LimiterStats> one_per_label(const std::vector<LimiterStats>& limiters) {
  std::vector<LimiterStats> out;
  std::map<std::string, std::size_t> by_label;
  for (const LimiterStats& limiter : limiters) {
    std::string label;
    detail::append_label_value(label, limiter.name);
    const auto [at, fresh] = by_label.try_emplace(std::move(label), out.size());
    if (fresh) {
      out.push_back(limiter);
    } else {
      add_stats(out[at->second], limiter);
    }
  }
  return out;
}

}  // namespace

std::string prometheus_text(const MetricsSnapshot& snapshot) {
  Exposition text;
  limiter_families(text, one_per_label(snapshot.limiters));
  redis_families(text, snapshot.redis);
  return text.take();
}

}  // namespace redlimit
