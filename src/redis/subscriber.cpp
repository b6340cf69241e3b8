#include "redis/subscriber.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <utility>

#include "redis/reply_convert.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"

namespace redlimit::detail {

Subscriber::Subscriber(uv_loop_t* loop, std::vector<Endpoint> endpoints,
                       ConnectionSettings settings, std::shared_ptr<spdlog::logger> logger)
    : loop_(loop),
      // Why raw replies: hiredis reads the fields of a subscribed context's replies itself.
      session_(loop, std::move(endpoints), settings, std::move(logger), "subscriber connection",
               Session::Replies::raw, *this) {
  session_.leave_failure_logs_to_owner();
}

std::uint64_t Subscriber::subscribe(const std::string& channel, Handler handler,
                                    std::function<void()> on_confirmed) {
  const std::uint64_t id = next_id_++;
  Channel& entry = channels_[channel];
  const bool first = entry.handlers.empty();
  entry.handlers.emplace(id, std::move(handler));
  if (on_confirmed) entry.on_confirmed.emplace(id, std::move(on_confirmed));
  channel_of_.emplace(id, channel);
  if (session_.state() == Session::State::idle) {
    session_.open();
  } else if (first && session_.state() == Session::State::ready) {
    send_subscribe(channel);
  }
  return id;
}

void Subscriber::unsubscribe(std::uint64_t id) {
  const auto found = channel_of_.find(id);
  if (found == channel_of_.end()) return;
  const std::string channel = found->second;
  channel_of_.erase(found);
  const auto entry = channels_.find(channel);
  entry->second.handlers.erase(id);
  entry->second.on_confirmed.erase(id);
  if (!entry->second.handlers.empty() || !entry->second.waiters.empty()) return;
  const bool was_confirmed = entry->second.generation != 0;
  channels_.erase(entry);
  if (session_.state() == Session::State::ready && was_confirmed) {
    const std::array<std::string_view, 2> argv = {"UNSUBSCRIBE", channel};
    session_.send(nullptr, nullptr, argv);
  }
}

std::uint64_t Subscriber::listening(std::uint64_t id) const {
  const auto found = channel_of_.find(id);
  if (found == channel_of_.end()) return 0;
  const auto entry = channels_.find(found->second);
  return entry == channels_.end() ? 0 : entry->second.generation;
}

Task<void> Subscriber::confirmed(std::string channel, Clock::time_point deadline) {
  for (;;) {
    if (closing()) {
      throw ConnectionError("redis " + display() + ": the subscriber is closed");
    }
    const auto entry = channels_.find(channel);
    if (entry == channels_.end()) throw UsageError("confirmed(): not subscribed to " + channel);
    if (entry->second.generation != 0) co_return;
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) {
      throw TimeoutError("redis " + display() + ": subscription to " + channel +
                         " not confirmed within the deadline");
    }
    std::stop_source wake;
    // Why a guard: the frame may be destroyed while waiting; the channel must forget `wake`.
    struct Registration {
      Subscriber& self;
      const std::string& channel;
      std::stop_source* wake;
      ~Registration() {
        if (const auto found = self.channels_.find(channel); found != self.channels_.end()) {
          std::erase(found->second.waiters, wake);
        }
      }
    } registration{*this, channel, &wake};
    entry->second.waiters.push_back(&wake);
    try {
      co_await sleep_for(loop_, std::chrono::ceil<std::chrono::microseconds>(left),
                         wake.get_token());
    } catch (const Cancelled&) {  // the confirmation arrived, or the subscriber closes
    }
  }
}

void Subscriber::wake_waiters(Channel& channel) {
  for (std::stop_source* waiter : std::exchange(channel.waiters, {}))
    waiter->request_stop();
}

// ---- the session

void Subscriber::session_ready() {
  for (auto& [name, channel] : channels_) {
    channel.generation = 0;
    send_subscribe(name);
  }
}

void Subscriber::session_failed(const std::exception_ptr& error) {
  unconfirm_all();
  enter_refused(describe(error));
}

void Subscriber::session_lost(const std::string& reason) {
  // Why: hiredis 0.14 answers a refused SUBSCRIBE by dropping the connection (the error reply
  // has no callback to go to), so a loss before every channel was confirmed is a refusal; without
  // a backoff here the subscriber reconnected thousands of times a second.
  const bool refused = any_unconfirmed();
  unconfirm_all();
  if (refused) {
    session_.back_off_after_loss();
    enter_refused("the connection ended before SUBSCRIBE was confirmed: " + reason);
    return;
  }
  if (health_ == Health::refused || health_ == Health::reconnecting) return;
  health_ = Health::reconnecting;
  session_.logger()->warn("redis {}: subscriber connection lost ({}); reconnecting", display(),
                          reason);
}

void Subscriber::enter_refused(const std::string& reason) {
  if (std::exchange(health_, Health::refused) == Health::refused) return;
  // Why only a warning: without notices each waiter asks Redis at its wake where its reservation
  // stands (one more call). But an operator must hear of it (an ACL without SUBSCRIBE).
  session_.logger()->warn(
      "redis {}: the subscriber cannot subscribe ({}); retrying with backoff. Meanwhile waiters "
      "ask Redis at their wake where their reservations stand, and stored policies reach "
      "followers only by policy_refresh",
      display(), reason);
}

void Subscriber::note_confirmed() {
  session_.backoff().reset();
  const Health before = std::exchange(health_, Health::subscribed);
  if (before == Health::refused || before == Health::reconnecting)
    session_.logger()->info("redis {}: the subscriber subscribed again", display());
}

bool Subscriber::any_unconfirmed() const {
  for (const auto& [name, channel] : channels_)
    if (channel.generation == 0) return true;
  return false;
}

void Subscriber::unconfirm_all() {
  for (auto& [name, channel] : channels_)
    channel.generation = 0;
}

void Subscriber::send_subscribe(const std::string& channel) {
  const std::array<std::string_view, 2> argv = {"SUBSCRIBE", channel};
  session_.send(&on_pubsub_reply, this, argv);
}

void Subscriber::on_pubsub_reply(redisAsyncContext* context, void* reply, void* privdata) {
  // A null context->data: the session dropped this context (its callbacks are stale).
  if (context->data == nullptr || reply == nullptr) return;
  auto* self = static_cast<Subscriber*>(privdata);
  const auto* r = static_cast<const redisReply*>(reply);
  if (r->type == REDIS_REPLY_ERROR) {
    self->enter_refused("SUBSCRIBE refused: " + std::string(r->str, r->len));
    return;
  }
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
      r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING) {
    return;
  }
  const std::string_view kind(r->element[0]->str, r->element[0]->len);
  const std::string channel(r->element[1]->str, r->element[1]->len);
  const auto entry = self->channels_.find(channel);
  if (entry == self->channels_.end()) return;
  if (kind == "subscribe") {
    entry->second.generation = ++self->generations_;
    self->note_confirmed();
    // Why a copy, taken first: a woken waiter or a callback may unsubscribe (itself or another).
    const auto callbacks = entry->second.on_confirmed;
    self->wake_waiters(entry->second);
    for (const auto& [id, on_confirmed] : callbacks)
      on_confirmed();
  } else if (kind == "message" && r->element[2]->type == REDIS_REPLY_STRING) {
    const std::string_view message(r->element[2]->str, r->element[2]->len);
    // Why a copy of the handlers: a handler may unsubscribe (itself or another).
    const auto handlers = entry->second.handlers;
    for (const auto& [id, handler] : handlers)
      handler(message);
  }
}

Task<void> Subscriber::close() {
  if (closing()) {
    co_await closed_.wait();
    co_return;
  }
  session_.begin_close();
  for (auto& [name, channel] : channels_)
    wake_waiters(channel);
  session_.release();
  co_await session_.closed();
  closed_.set();
}

}  // namespace redlimit::detail
