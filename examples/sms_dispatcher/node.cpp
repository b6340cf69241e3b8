#include "node.hpp"

#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

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
  co_await RepliesAwaiter{*this};
  progress_.done = true;
  link_.close();
}

redlimit::Task<void> Node::sender() {
  while (next_message_ < settings_.messages && !progress_.provider_lost) {
    const std::int64_t message = next_message_++;
    if (limiter_ != nullptr) co_await wait_for_permit(message);
    if (progress_.provider_lost) break;
    link_.send("SEND " + std::to_string(settings_.id) + " " + std::to_string(message) + "\n");
    ++progress_.sent;
    co_await redlimit::sleep_for(loop_, settings_.pause);
  }
}

redlimit::Task<void> Node::wait_for_permit(std::int64_t message) {
  for (;;) {
    try {
      // No max_wait: every message goes out, at the shared rate, however long the queue.
      co_await limiter_->acquire("provider");
      co_return;
    } catch (const redlimit::Error& e) {
      ++progress_.errors;
      std::fprintf(stderr, "node %d: message %lld: %s; retrying in 100 ms\n", settings_.id,
                   static_cast<long long>(message), e.what());
    }
    co_await redlimit::sleep_for(loop_, std::chrono::milliseconds(100));
  }
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
