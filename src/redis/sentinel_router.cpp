#include "redis/sentinel_router.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <random>
#include <sstream>

#include "redis/reply_convert.hpp"
#include "redis/session.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"

namespace redlimit::detail {
namespace {

/// The channel on which sentinels announce that a primary moved.
constexpr std::string_view switch_channel = "+switch-master";

/// True when `a` and `b` are the same server.
bool same_server(const Endpoint& a, const Endpoint& b) {
  return a.host == b.host && a.port == b.port;
}

std::optional<int> port_of(std::string_view text) {
  int port = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc{} || end != text.data() + text.size() || port < 1 || port > 65535) {
    return std::nullopt;
  }
  return port;
}

}  // namespace

SentinelRouter::SentinelRouter(uv_loop_t* loop, BackgroundTasks& tasks, SentinelConfig config,
                               ConnectionSettings settings, ConnectionSettings sentinel_settings,
                               std::chrono::milliseconds command_timeout,
                               std::shared_ptr<spdlog::logger> logger)
    : loop_(loop),
      tasks_(tasks),
      config_(std::move(config)),
      sentinel_settings_(std::move(sentinel_settings)),
      command_timeout_(command_timeout),
      logger_(std::move(logger)),
      name_("sentinel primary '" + config_.master + "'"),
      backoff_(settings.reconnect_min, settings.reconnect_max,
               std::random_device{}() ^ reinterpret_cast<std::uintptr_t>(this)) {
  for (const Endpoint& sentinel : config_.sentinels)
    sentinels_.push_back(
        std::make_unique<Connection>(loop_, sentinel, sentinel_settings_, logger_));
  settings.endpoint_source = this;
  primary_ = std::make_unique<Connection>(loop_, config_.primary, settings, logger_, name_);
}

std::optional<Endpoint> SentinelRouter::current() {
  if (!primary_at_) start_lookup();
  return primary_at_;
}

void SentinelRouter::trouble_with(const Endpoint& endpoint) {
  troubled_ = endpoint;
  start_lookup();
}

NextTry SentinelRouter::next_try(const TryOutcome& outcome, std::optional<std::uint16_t>,
                                 Hops& hops) {
  if (outcome.reply == nullptr) {
    suspect_topology();
    return {};
  }
  if (outcome.reply->type != Reply::Type::error) return {};
  // Why a recheck for these alone: the server at the primary's address answers as a replica
  // (demoted, and still named by a sentinel): only a reconnect checks its ROLE again. A lost
  // connection is made again, and checked, by its session; rechecking it too would drop the
  // healthy connection, and fail the calls in flight on it, at every lookup.
  // (Redis 6.2 wraps a script's READONLY in "ERR Error running script": its kind tells it.)
  if (classify_error_reply(outcome.reply->str) == ErrorReplyKind::stale_primary ||
      error_code(outcome.reply->str) == "MASTERDOWN") {
    recheck_ = true;
  }
  return pause_if_not_now(*outcome.reply, hops);
}

void SentinelRouter::suspect_topology() {
  if (primary_at_) troubled_ = primary_at_;
  start_lookup();
}

void SentinelRouter::watch(Session& session) {
  sessions_.push_back(&session);
}

void SentinelRouter::forget(Session& session) {
  std::erase(sessions_, &session);
}

void SentinelRouter::start_lookup() {
  if (closing_) return;
  if (looking_) {
    again_ = true;
    return;
  }
  looking_ = true;
  // Why here: the announcements matter from the first lookup on, and a subscription (re)made
  // may have missed a switch, so it looks again. Why every sentinel: a sentinel that stalls
  // keeps its connection open, and a subscription to it alone would hear of no switch.
  if (announcements_.empty()) {
    for (const Endpoint& sentinel : config_.sentinels) {
      auto& announcements = announcements_.emplace_back(std::make_unique<Subscriber>(
          loop_, std::vector<Endpoint>{sentinel}, sentinel_settings_, logger_));
      announcements->subscribe(
          std::string(switch_channel), [this](std::string_view message) { on_switch(message); },
          [this] { start_lookup(); });
    }
  }
  tasks_.start_upkeep(look_up());
}

Task<void> SentinelRouter::look_up() {
  // Why not a member flag alone: close() waits for this task, which ends here.
  struct Ended {
    SentinelRouter& router;
    ~Ended() {
      router.looking_ = false;
      if (router.closing_) router.lookups_done_.set();
    }
  } ended{*this};
  for (;;) {
    const auto wait = last_lookup_ + lookup_interval - Clock::now();
    try {
      if (wait > Clock::duration::zero()) {
        co_await sleep_for(loop_, std::chrono::ceil<std::chrono::microseconds>(wait),
                           stop_.get_token());
      }
    } catch (const Cancelled&) {
      co_return;
    }
    if (closing_) co_return;
    last_lookup_ = Clock::now();
    again_ = false;
    const std::uint64_t switches = switches_;
    const bool recheck = std::exchange(recheck_, false);
    std::exception_ptr failure;
    std::optional<Endpoint> primary = co_await ask_sentinels(std::exchange(troubled_, {}), failure);
    if (closing_) co_return;
    if (switches_ != switches) {
      // Why dropped: a +switch-master came while asking, and it is newer than these answers.
    } else if (primary) {
      backoff_.reset();
      found(std::move(*primary), recheck);
    } else {
      if (!failure) {
        failure = std::make_exception_ptr(ConfigError("no sentinel knows a primary named '" +
                                                      config_.master + "' (SENTINEL monitor)"));
      }
      const auto delay = backoff_.next();
      logger_->warn("redis {}: no sentinel named the primary ({}); asking again in {} ms", name_,
                    describe(failure), delay.count());
      // Why a copy: a session told may end its wait, and forget itself, while this walks.
      for (Session* session : std::vector<Session*>(sessions_))
        session->endpoint_unknown(failure);
      last_lookup_ = Clock::now() + delay - lookup_interval;
      continue;
    }
    if (!again_) co_return;
  }
}

Task<std::optional<Endpoint>> SentinelRouter::ask_sentinels(std::optional<Endpoint> avoid,
                                                            std::exception_ptr& failure) {
  std::optional<Endpoint> fallback;
  for (std::size_t i = 0; i < sentinels_.size() && !closing_; ++i) {
    std::optional<Endpoint> answer;
    try {
      answer = co_await ask(*sentinels_[i]);
    } catch (...) {
      failure = std::current_exception();
    }
    if (!answer) continue;
    // Why the old primary passed over too: after a switch, the calls in flight on it fail as
    // the client moves, and their lookup avoids the new primary; a sentinel that has not heard
    // of the switch yet would send the client back, to write where nobody reads.
    if ((avoid && same_server(*answer, *avoid)) ||
        (switched_from_ && same_server(*answer, *switched_from_))) {
      if (!fallback) fallback = std::move(answer);
      continue;
    }
    // Why first from now on: the Sentinel client guidelines; a sentinel that answered is
    // likely up, and in the majority.
    std::rotate(sentinels_.begin(), sentinels_.begin() + static_cast<std::ptrdiff_t>(i),
                sentinels_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    co_return answer;
  }
  co_return fallback;
}

Task<std::optional<Endpoint>> SentinelRouter::ask(Connection& sentinel) {
  const std::array<std::string_view, 3> question{"SENTINEL", "get-master-addr-by-name",
                                                 config_.master};
  const auto deadline = Clock::now() + sentinel_settings_.connect_timeout + command_timeout_;
  CommandResult answer = co_await sentinel.send(question, deadline);
  const Reply& reply = answer.reply;
  if (reply.type == Reply::Type::error) {
    std::rethrow_exception(exception_from_error(reply.str));
  }
  if (reply.is_nil()) co_return std::nullopt;
  if (reply.type != Reply::Type::array || reply.elements.size() != 2 ||
      reply.elements[0].type != Reply::Type::string) {
    throw ProtocolError("redis " + sentinel.name() + ": an answer to SENTINEL " +
                        "get-master-addr-by-name that is no address");
  }
  const std::optional<int> port = port_of(reply.elements[1].str);
  if (!port) {
    throw ProtocolError("redis " + sentinel.name() + " named a port that is none: '" +
                        reply.elements[1].str + "'");
  }
  Endpoint primary = config_.primary;
  primary.host = reply.elements[0].str;
  primary.port = *port;
  co_return primary;
}

void SentinelRouter::on_switch(std::string_view message) {
  std::istringstream words{std::string(message)};
  std::string master, old_host, old_port, host, port;
  if (!(words >> master >> old_host >> old_port >> host >> port) || master != config_.master) {
    return;
  }
  const std::optional<int> number = port_of(port);
  if (!number) return;
  Endpoint primary = config_.primary;
  primary.host = host;
  primary.port = *number;
  if (const std::optional<int> old_number = port_of(old_port)) {
    switched_from_ = config_.primary;
    switched_from_->host = old_host;
    switched_from_->port = *old_number;
  }
  ++switches_;
  found(std::move(primary), false);
}

void SentinelRouter::found(Endpoint primary, bool recheck) {
  if (closing_) return;
  if (primary_at_ && same_server(*primary_at_, primary)) {
    if (!recheck) return;
  } else {
    logger_->info("redis {}: at {}:{}", name_, primary.host, primary.port);
    primary_at_ = std::move(primary);
  }
  for (Session* session : std::vector<Session*>(sessions_))
    session->endpoint_changed();
}

Task<void> SentinelRouter::connect(Clock::time_point deadline) {
  static constexpr std::array<std::string_view, 1> ping = {"PING"};
  CommandResult result = co_await primary_->send(ping, deadline);
  if (result.reply.type == Reply::Type::error) {
    std::rethrow_exception(exception_from_error(result.reply.str));
  }
}

Task<void> SentinelRouter::close() {
  closing_ = true;
  stop_.request_stop();
  if (looking_) co_await lookups_done_.wait();
  co_await primary_->close();
  for (const auto& announcements : announcements_)
    co_await announcements->close();
  for (const auto& sentinel : sentinels_)
    co_await sentinel->close();
}

}  // namespace redlimit::detail
