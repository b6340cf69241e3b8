#pragma once
// One dispatcher node: its own queue of messages, sent to the provider as fast as the node can
// (`senders` coroutines, each pausing `pause` after a send) but only when the shared limiter
// lets it: `co_await limiter.acquire("provider")` before every message.

#include <uv.h>

#include <chrono>
#include <cstdint>

#include "provider_link.hpp"
#include "redlimit/redlimit.hpp"

/// What a node has done so far; read at any time by the progress display.
struct NodeProgress {
  std::int64_t queued = 0;    ///< messages in its queue at the start
  std::int64_t sent = 0;      ///< handed to the provider
  std::int64_t accepted = 0;  ///< answered "OK"
  std::int64_t rejected = 0;  ///< answered "REJECT": lost
  /// limiter errors and failure policy denials: Redis unavailable, or its answer too late to
  /// use (the message was retried)
  std::int64_t errors = 0;
  bool done = false;           ///< every message sent and answered, or the provider gone
  bool provider_lost = false;  ///< the provider closed the connection early
};

/// How a node sends.
struct NodeSettings {
  int id = 1;
  std::int64_t messages = 0;
  int provider_port = 0;
  int senders = 8;
  std::chrono::milliseconds pause{8};  ///< per sender: 8 senders x 1 per 8 ms = 1000/s a node
  /// A permit answered later than this after its slot is not used (max_lateness()).
  std::chrono::microseconds max_lateness = std::chrono::microseconds::max();
};

/// Use on the loop's thread. `limiter` may be null: no limit (to show the losses).
class Node {
 public:
  Node(uv_loop_t* loop, redlimit::Limiter* limiter, NodeSettings settings);
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /// Connects to the provider, sends the whole queue, and returns once every message has been
  /// answered (or the provider went away: see NodeProgress::provider_lost). Throws
  /// std::runtime_error when the provider cannot be reached.
  redlimit::Task<void> run();
  const NodeProgress& progress() const noexcept { return progress_; }
  const NodeSettings& settings() const noexcept { return settings_; }

 private:
  redlimit::Task<void> sender();
  /// Waits for the limiter's permit for `message`: true once allowed, false if the provider is
  /// gone. Retries while Redis is unavailable or late; throws after 10 s of it, or at once for
  /// errors that retrying cannot fix.
  redlimit::Task<bool> wait_for_permit(std::int64_t message);
  bool all_answered() const noexcept;
  void on_reply(Reply reply);

  uv_loop_t* loop_;
  redlimit::Limiter* limiter_;
  NodeSettings settings_;
  NodeProgress progress_;
  std::int64_t next_message_ = 0;
  bool failing_ = false;  ///< a sender was denied since the last permit (reported once)
  ProviderLink link_;
  std::coroutine_handle<> awaiting_replies_;
};
