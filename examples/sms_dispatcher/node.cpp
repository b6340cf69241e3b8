#include "node.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace {

using Clock = std::chrono::steady_clock;
/// How long a node keeps retrying while Redis cannot answer before it gives up (and exits 1).
constexpr auto give_up_after = std::chrono::seconds(10);

}  // namespace

Node::Node(uv_loop_t* loop, redlimit::Limiter* limiter, NodeSettings settings)
    : loop_(loop),
      limiter_(limiter),
      settings_(settings),
      link_(loop, [this](Reply reply) { on_reply(reply); }) {
  progress_.queued = settings_.messages;
}

redlimit::Task<void> Node::run() {
  if (const int status = co_await link_.connect(settings_.provider_port); status != 0)
    throw std::runtime_error(std::string("cannot reach the provider: ") + uv_strerror(status));
  redlimit::TaskGroup senders;
  for (int i = 0; i < settings_.senders; ++i)
    senders.add(sender());
  co_await senders.join();

  struct RepliesAwaiter {
    Node& node;
    bool await_ready() const noexcept { return node.all_answered(); }
    void await_suspend(std::coroutine_handle<> waiting) noexcept {
      node.awaiting_replies_ = waiting;
    }
    void await_resume() const noexcept {}
  };
  RepliesAwaiter all_replies{*this};
  co_await all_replies;
  progress_.done = true;
  link_.close();
}

redlimit::Task<void> Node::sender() {
  while (next_message_ < settings_.messages && !progress_.provider_lost) {
    const std::int64_t message = next_message_++;
    if (limiter_ != nullptr) {
      const bool permitted = co_await wait_for_permit(message);
      if (!permitted) break;
    }
    if (progress_.provider_lost) break;
    link_.send("SEND " + std::to_string(settings_.id) + " " + std::to_string(message) + "\n");
    ++progress_.sent;
    co_await redlimit::sleep_for(loop_, settings_.pause);
  }
}

redlimit::Task<bool> Node::wait_for_permit(std::int64_t message) {
  std::optional<Clock::time_point> failing_since;
  while (!progress_.provider_lost) {
    std::string failure;
    std::chrono::microseconds retry = std::chrono::milliseconds(10);
    try {
      // No max_wait: every message goes out, at the shared rate, however long the queue.
      const redlimit::Decision d =
          co_await limiter_->acquire("provider", 1, {.max_lateness = settings_.max_lateness});
      if (d.allowed) {
        failing_ = false;
        co_return true;
      }
      // Only a failure policy denies an acquire() without max_wait: Redis did not answer, or
      // answered too late for the permit to be used in time.
      failure = "Redis unavailable or late, denied by the failure policy";
      retry = std::max(retry, d.retry_after);
    } catch (const redlimit::Unavailable& e) {
      failure = e.what();
    }
    // Anything else (a wrong password, a missing permission) will not go away: it propagates.
    ++progress_.errors;
    const auto now = Clock::now();
    if (!failing_since) failing_since = now;
    if (now - *failing_since > give_up_after) {
      throw std::runtime_error("message " + std::to_string(message) + ": " + failure +
                               " for more than 10 s; giving up");
    }
    // Why once until a permit comes again: a failover denies every sender for a while.
    if (!std::exchange(failing_, true)) {
      std::fprintf(stderr, "node %d: message %lld: %s; retrying\n", settings_.id,
                   static_cast<long long>(message), failure.c_str());
    }
    co_await redlimit::sleep_for(loop_, retry);
  }
  co_return false;
}

bool Node::all_answered() const noexcept {
  return progress_.provider_lost || progress_.accepted + progress_.rejected == progress_.sent;
}

void Node::on_reply(Reply reply) {
  switch (reply) {
    case Reply::accepted:
      ++progress_.accepted;
      break;
    case Reply::rejected:
      ++progress_.rejected;
      break;
    case Reply::connection_lost:
      progress_.provider_lost = true;
      break;
  }
  if (all_answered()) {
    if (auto waiting = std::exchange(awaiting_replies_, {})) waiting.resume();
  }
}
