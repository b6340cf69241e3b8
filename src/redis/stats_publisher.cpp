#include "redis/stats_publisher.hpp"

#include <array>
#include <string_view>

#include "redis/command_dispatcher.hpp"
#include "runtime/background_tasks.hpp"

namespace redlimit::detail {
namespace {

constexpr std::array<std::string_view, 4> field_names{"allowed", "denied", "shadow_denied",
                                                      "failure_policy"};

/// The counts as they are now, by PublishedCount.
std::array<std::uint64_t, 4> current_counts(const LimiterMetrics& counters) {
  std::array<std::uint64_t, 4> out{};
  for (std::size_t allowed = 0; allowed < 2; ++allowed) {
    for (std::size_t source = 0; source < source_count; ++source) {
      const std::uint64_t count = counters.decisions[allowed][source].value();
      out[allowed == 1 ? 0 : 1] += count;
      const auto from = static_cast<Source>(source);
      if (from == Source::fallback || from == Source::fail_open || from == Source::fail_closed) {
        out[3] += count;
      }
    }
  }
  out[2] = counters.shadow_denials.value();
  return out;
}

}  // namespace

StatsPublisher::StatsPublisher(uv_loop_t* loop, CommandDispatcher& redis,
                               std::chrono::milliseconds interval)
    : loop_(loop), redis_(redis), interval_(interval) {}

void StatsPublisher::add(std::string key, std::shared_ptr<Metrics> owner,
                         LimiterMetrics& counters) {
  if (closed_) return;
  for (const Source& source : sources_) {
    if (source.counters == &counters && source.key == key) return;
  }
  sources_.push_back(Source{std::move(key), std::move(owner), &counters});
  if (!timer_) {
    timer_ = std::make_unique<Timer>(loop_, &on_timer, this, nullptr);
    // Why unref: publishing alone must not keep the loop running.
    timer_->unref();
    timer_->start(static_cast<std::uint64_t>(interval_.count()));
  }
}

void StatsPublisher::on_timer(void* context) {
  auto& self = *static_cast<StatsPublisher*>(context);
  if (self.closed_) return;
  self.timer_->start(static_cast<std::uint64_t>(self.interval_.count()));
  if (self.publishing_) return;
  self.redis_.background().start(self.publish());
}

Task<void> StatsPublisher::publish() {
  publishing_ = true;
  const std::string ttl = std::to_string(std::chrono::milliseconds(published_counts_ttl).count());
  for (const Source& source : sources_) {
    const std::array<std::uint64_t, 4> now = current_counts(*source.counters);
    // The script's arguments: the TTL, then a field and its increment for each count that grew.
    std::vector<std::string> words(1, ttl);
    for (std::size_t field = 0; field < now.size(); ++field) {
      const std::uint64_t before = source.counters->published[field].exchange(now[field]);
      if (now[field] <= before) continue;
      words.emplace_back(field_names[field]);
      words.push_back(std::to_string(now[field] - before));
    }
    if (words.size() == 1) continue;
    std::array<std::string_view, 1> keys;
    keys[0] = source.key;
    const std::vector<std::string_view> args(words.begin(), words.end());
    try {
      co_await redis_.eval(scripts::fleet_counts, keys, args, redis_.command_deadline());
    } catch (...) {
      // Unavailable, or refused (an ACL without HINCRBY): this interval's counts are lost.
    }
  }
  publishing_ = false;
}

Task<void> StatsPublisher::close() {
  if (closed_) co_return;
  closed_ = true;
  if (timer_) timer_->close();
  if (!publishing_ && !sources_.empty()) co_await publish();
}

}  // namespace redlimit::detail
