#include "fleet/stats_publisher.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <map>
#include <string_view>

#include "fleet/fleet_schema.hpp"
#include "lua_scripts.hpp"
#include "policy/key_format.hpp"
#include "redis/command_dispatcher.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/task_group.hpp"
#include "runtime/background_tasks.hpp"

namespace redlimit::detail {
namespace {

std::string ttl_ms() {
  return std::to_string(std::chrono::milliseconds(fleet_counts_ttl).count());
}

}  // namespace

StatsPublisher::StatsPublisher(std::shared_ptr<CommandDispatcher> redis,
                               std::chrono::milliseconds interval)
    : loop_(redis->loop()),
      shared_(std::make_shared<Shared>(Shared{.redis = std::move(redis)})),
      interval_(interval) {}

std::shared_ptr<FleetTally> StatsPublisher::add(std::string prefix, std::string name) {
  for (const Source& source : sources_) {
    if (source.prefix == prefix && source.name == name) return source.tally;
  }
  sources_.push_back(Source{std::move(prefix), std::move(name), std::make_shared<FleetTally>()});
  std::shared_ptr<FleetTally> tally = sources_.back().tally;
  if (closing_) return tally;  // counted, never sent: the client has closed
  if (!timer_) {
    timer_ = std::make_unique<Timer>(loop_, &on_timer, this, nullptr);
    // Why unref: publishing alone must not keep the loop running.
    timer_->unref();
    timer_->start(static_cast<std::uint64_t>(interval_.count()));
  }
  return tally;
}

void StatsPublisher::on_timer(void* context) {
  auto& self = *static_cast<StatsPublisher*>(context);
  if (self.closing_) return;
  self.timer_->start(static_cast<std::uint64_t>(self.interval_.count()));
  // A slow Redis: the next publication waits for this one.
  if (self.shared_->publishing) return;
  self.forget_unheld();
  start_detached(publish_marked(self.shared_, self.sources_));
}

void StatsPublisher::forget_unheld() {
  // Why no publication runs here: one under way holds its own copies of the tallies.
  std::erase_if(sources_, [](const Source& source) {
    return source.tally.use_count() == 1 && source.tally->decided == source.tally->published;
  });
}

Task<void> StatsPublisher::publish_marked(std::shared_ptr<Shared> shared,
                                          std::vector<Source> sources) {
  shared->publishing = std::make_unique<Completion>();
  std::exception_ptr error;
  try {
    co_await publish(shared, std::move(sources));
  } catch (...) {
    error = std::current_exception();  // out of memory: close() still goes on
  }
  // Why moved out before set(): a resumed close() may start the last publication.
  const std::unique_ptr<Completion> ended = std::move(shared->publishing);
  ended->set();
  if (error) std::rethrow_exception(error);
}

Task<void> StatsPublisher::publish(std::shared_ptr<Shared> shared, std::vector<Source> sources) {
  // Why one deadline, and every name at once: a publication, and so close(), ends within one
  // command timeout however many names there are, also when Redis does not answer.
  const auto deadline = shared->redis->command_deadline();
  std::vector<char> sent(sources.size(), 0);
  TaskGroup sends;
  for (std::size_t i = 0; i < sources.size(); ++i)
    sends.add(publish_counts(*shared, sources[i], deadline, &sent[i]));
  co_await sends.join();
  std::map<std::string, std::vector<std::string>> published;  // names, by prefix
  for (std::size_t i = 0; i < sources.size(); ++i) {
    if (sent[i] != 0) published[sources[i].prefix].push_back(sources[i].name);
  }
  for (auto& [prefix, names] : published)
    co_await publish_names(*shared, prefix, std::move(names), deadline);
}

Task<void> StatsPublisher::publish_counts(Shared& shared, Source source, Clock::time_point deadline,
                                          char* sent) {
  FleetTally& tally = *source.tally;
  // The script's arguments: the TTL, then a field and its increment for each count that grew.
  std::vector<std::string> words(1, ttl_ms());
  for (std::size_t field = 0; field < tally.decided.size(); ++field) {
    const std::uint64_t growth = tally.decided[field] - tally.published[field];
    tally.published[field] = tally.decided[field];
    if (growth == 0) continue;
    words.emplace_back(fleet_count_fields[field]);
    words.push_back(std::to_string(growth));
  }
  if (words.size() == 1) co_return;
  const std::string key = stats_key(source.prefix, escape_key_part(source.name));
  const std::array<std::string_view, 1> keys{key};
  const std::vector<std::string_view> args(words.begin(), words.end());
  std::exception_ptr error;
  try {
    co_await shared.redis->eval_own(scripts::fleet_counts, keys, args, deadline);
    *sent = 1;
    shared.failing = false;
  } catch (...) {
    error = std::current_exception();
  }
  if (error) failed(shared, error);
}

Task<void> StatsPublisher::publish_names(Shared& shared, std::string prefix,
                                         std::vector<std::string> names,
                                         Clock::time_point deadline) {
  const std::string key = stats_names_key(prefix);
  const std::array<std::string_view, 1> keys{key};
  names.insert(names.begin(), ttl_ms());
  const std::vector<std::string_view> args(names.begin(), names.end());
  std::exception_ptr error;
  try {
    co_await shared.redis->eval_own(scripts::fleet_names, keys, args, deadline);
    shared.failing = false;
  } catch (...) {
    error = std::current_exception();
  }
  if (error) failed(shared, error);
}

void StatsPublisher::failed(Shared& shared, const std::exception_ptr& error) {
  if (std::exchange(shared.failing, true)) return;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    shared.redis->logger()->warn(
        "redlimit: the fleet's decision counts were not sent ({}); they are "
        "dropped until a send succeeds",
        e.what());
  } catch (...) {
    shared.redis->logger()->warn(
        "redlimit: the fleet's decision counts were not sent; they are "
        "dropped until a send succeeds");
  }
}

Task<void> StatsPublisher::close() {
  if (closing_) {
    co_await closed_.wait();
    co_return;
  }
  closing_ = true;
  if (timer_) timer_->close();
  std::exception_ptr error;
  try {
    if (shared_->publishing) co_await shared_->publishing->wait();
    if (!sources_.empty()) co_await publish(shared_, sources_);
  } catch (...) {
    error = std::current_exception();  // out of memory: a second close() still ends
  }
  // Why last: a resumed second close() may destroy the client.
  closed_.set();
  if (error) std::rethrow_exception(error);
}

}  // namespace redlimit::detail
