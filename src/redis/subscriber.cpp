#include "redis/subscriber.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <random>
#include <utility>

#include "redis/hiredis_context.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"

namespace redlimit::detail {

Subscriber::Subscriber(uv_loop_t* loop, std::vector<Endpoint> endpoints,
                       ConnectionSettings settings, std::shared_ptr<spdlog::logger> logger)
    : loop_(loop),
      endpoints_(std::move(endpoints)),
      settings_(settings),
      logger_(std::move(logger)),
      connect_timer_(loop, &on_connect_timer, this, latch_.get()),
      backoff_timer_(loop, &on_backoff_timer, this, latch_.get()),
      backoff_(settings.reconnect_min, settings.reconnect_max,
               std::random_device{}() ^ reinterpret_cast<std::uintptr_t>(this)) {
  connect_timer_.unref();
  backoff_timer_.unref();
}

Subscriber::~Subscriber() {
  if (redisAsyncContext* context = std::exchange(context_, nullptr)) {
    context->data = nullptr;
    redisAsyncFree(context);
  }
}

std::uint64_t Subscriber::subscribe(const std::string& channel, Handler handler) {
  const std::uint64_t id = next_id_++;
  Channel& entry = channels_[channel];
  const bool first = entry.handlers.empty();
  entry.handlers.emplace(id, std::move(handler));
  channel_of_.emplace(id, channel);
  if (state_ == State::idle) {
    start_connect();
  } else if (first && state_ == State::ready) {
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
  if (!entry->second.handlers.empty() || !entry->second.waiters.empty()) return;
  const bool was_confirmed = entry->second.confirmed;
  channels_.erase(entry);
  if (state_ == State::ready && was_confirmed) {
    const std::array<std::string_view, 2> argv = {"UNSUBSCRIBE", channel};
    send_argv(context_, nullptr, nullptr, argv, command_buffer_);
  }
}

Task<void> Subscriber::confirmed(std::string channel, Clock::time_point deadline) {
  for (;;) {
    if (state_ == State::closing || state_ == State::closed) {
      throw ConnectionError("redis " + endpoint().display() + ": the subscriber is closed");
    }
    const auto entry = channels_.find(channel);
    if (entry == channels_.end()) throw UsageError("confirmed(): not subscribed to " + channel);
    if (entry->second.confirmed) co_return;
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) {
      throw TimeoutError("redis " + endpoint().display() + ": subscription to " + channel +
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

// ---- connecting

void Subscriber::start_connect() {
  state_ = State::connecting;
  OpenedContext opened = open_context(endpoint(), loop_, latch_, this, &on_connect, &on_disconnect);
  if (opened.context == nullptr) return attempt_failed(opened.error);
  context_ = opened.context;
  connect_timer_.start(static_cast<std::uint64_t>(settings_.connect_timeout.count()));
  if (endpoint().password.empty()) return subscribe_all();
  std::vector<std::string_view> auth = {"AUTH"};
  if (!endpoint().user.empty()) auth.push_back(endpoint().user);
  auth.push_back(endpoint().password);
  send_argv(context_, &on_auth_reply, nullptr, auth, command_buffer_);
}

void Subscriber::on_connect(const redisAsyncContext* context, int status) {
  auto* self = static_cast<Subscriber*>(context->data);
  if (self == nullptr || status == REDIS_OK) return;
  const std::string why = context->c.errstr;
  const_cast<redisAsyncContext*>(context)->data = nullptr;  // hiredis frees it after this
  self->context_ = nullptr;
  self->attempt_failed(why);
}

void Subscriber::on_auth_reply(redisAsyncContext* context, void* reply, void*) {
  auto* self = static_cast<Subscriber*>(context->data);
  if (self == nullptr || reply == nullptr) return;
  const auto* r = static_cast<const redisReply*>(reply);
  if (r->type == REDIS_REPLY_ERROR) {
    const std::string why = "AUTH refused: " + std::string(r->str, r->len);
    self->drop_context();
    self->attempt_failed(why);
    return;
  }
  self->subscribe_all();
}

void Subscriber::subscribe_all() {
  state_ = State::ready;
  if (channels_.empty()) connect_timer_.stop();
  for (auto& [name, channel] : channels_) {
    channel.confirmed = false;
    send_subscribe(name);
  }
}

void Subscriber::send_subscribe(const std::string& channel) {
  const std::array<std::string_view, 2> argv = {"SUBSCRIBE", channel};
  send_argv(context_, &on_pubsub_reply, this, argv, command_buffer_);
}

void Subscriber::on_pubsub_reply(redisAsyncContext* context, void* reply, void*) {
  auto* self = static_cast<Subscriber*>(context->data);
  if (self == nullptr || reply == nullptr) return;
  const auto* r = static_cast<const redisReply*>(reply);
  if (r->type == REDIS_REPLY_ERROR) {
    // Why only a warning: notices only make waiters wake early; without them each waiter still
    // wakes at its reserved time. But an operator must hear of it (an ACL without SUBSCRIBE).
    if (!std::exchange(self->refusal_logged_, true)) {
      self->logger_->warn("redis {}: SUBSCRIBE refused ({}); waiters wake only at their own times",
                          self->endpoint().display(), std::string_view(r->str, r->len));
    }
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
    self->connect_timer_.stop();
    self->backoff_.reset();
    entry->second.confirmed = true;
    self->wake_waiters(entry->second);
  } else if (kind == "message" && r->element[2]->type == REDIS_REPLY_STRING) {
    const std::string_view message(r->element[2]->str, r->element[2]->len);
    // Why a copy of the handlers: a handler may unsubscribe (itself or another).
    const auto handlers = entry->second.handlers;
    for (const auto& [id, handler] : handlers)
      handler(message);
  }
}

void Subscriber::on_disconnect(const redisAsyncContext* context, int) {
  auto* self = static_cast<Subscriber*>(context->data);
  if (self == nullptr) return;
  const std::string why = context->err != 0 ? context->errstr : "disconnected";
  self->context_ = nullptr;  // hiredis frees it when this returns
  self->lost(why);
}

void Subscriber::on_connect_timer(void* argument) {
  auto* self = static_cast<Subscriber*>(argument);
  if (self->context_ == nullptr) return;
  self->drop_context();
  self->attempt_failed("no answer within " +
                       std::to_string(self->settings_.connect_timeout.count()) + " ms");
}

void Subscriber::on_backoff_timer(void* argument) {
  auto* self = static_cast<Subscriber*>(argument);
  if (self->state_ == State::backoff || self->state_ == State::connecting) self->start_connect();
}

void Subscriber::attempt_failed(const std::string& why) {
  connect_timer_.stop();
  if (state_ == State::closing || state_ == State::closed) return;
  for (auto& [name, channel] : channels_)
    channel.confirmed = false;
  const auto delay = backoff_.next();
  logger_->warn("redis {}: subscriber connection failed: {}; next attempt in {} ms",
                endpoint().display(), why, delay.count());
  current_ = (current_ + 1) % endpoints_.size();
  state_ = State::backoff;
  backoff_timer_.start(static_cast<std::uint64_t>(delay.count()));
}

void Subscriber::lost(const std::string& why) {
  for (auto& [name, channel] : channels_)
    channel.confirmed = false;
  if (state_ == State::closing || state_ == State::closed) return;
  if (state_ == State::ready) {
    logger_->warn("redis {}: subscriber connection lost ({}); reconnecting", endpoint().display(),
                  why);
    current_ = (current_ + 1) % endpoints_.size();
    state_ = State::connecting;
    backoff_timer_.start(0);
  } else {
    attempt_failed(why);
  }
}

void Subscriber::drop_context() {
  redisAsyncContext* context = std::exchange(context_, nullptr);
  if (context == nullptr) return;
  context->data = nullptr;
  redisAsyncFree(context);
}

Task<void> Subscriber::close() {
  if (state_ == State::closing || state_ == State::closed) {
    co_await closed_.wait();
    co_return;
  }
  state_ = State::closing;
  for (auto& [name, channel] : channels_)
    wake_waiters(channel);
  drop_context();
  connect_timer_.close();
  backoff_timer_.close();
  co_await latch_->all_closed();
  state_ = State::closed;
  closed_.set();
}

}  // namespace redlimit::detail
