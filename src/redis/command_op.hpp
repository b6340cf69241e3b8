#pragma once

#include <chrono>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "redlimit/reply.hpp"
#include "redlimit/task.hpp"

namespace redlimit::detail {

class Connection;

/// What a command produced: the reply (errors included, as Reply::Type::error) and the send
/// sequence number it had on its connection.
struct CommandResult {
  Reply reply;
  std::uint64_t sequence = 0;
};

/// One command between send() and its completion. Heap-allocated and reference-counted: the
/// awaiter holds one reference, hiredis another while it holds the op as privdata (hiredis
/// cannot cancel a callback, so a timed-out or abandoned op must outlive its late reply).
struct CommandOp {
  using Clock = std::chrono::steady_clock;
  enum class Stage { queued, in_flight, done };

  Connection* connection = nullptr;  ///< null once the connection has let go of the op
  std::coroutine_handle<> waiter;    ///< the coroutine to resume; null when nobody waits
  Clock::time_point deadline;
  Stage stage = Stage::queued;
  bool asking = false;                   ///< ASKING: written with the next command, one round trip
  std::uint64_t sequence = 0;            ///< send order on the connection; 0 until sent
  std::vector<std::string> queued_argv;  ///< owned copy while waiting for a connection
  std::optional<Reply> reply;
  std::exception_ptr error;
  int references = 1;
  CommandOp* earlier = nullptr;  ///< deadline list, ordered by deadline
  CommandOp* later = nullptr;

  static void release(CommandOp* op) noexcept {
    if (--op->references == 0) delete op;
  }
  // Why the coroutine frame pool: one op per command is the hot path's only allocation of
  // this size; the pool hands the same blocks out again.
  static void* operator new(std::size_t size) { return allocate_frame(size); }
  static void operator delete(void* op, std::size_t size) noexcept { free_frame(op, size); }
};

/// `co_await connection.send(...)`: the reply, or the error the command failed with.
/// Destroying it before completion (the awaiting frame was destroyed) abandons the command:
/// one not yet sent is dropped, one in flight has its reply discarded.
class CommandAwaiter {
 public:
  explicit CommandAwaiter(CommandOp* op) noexcept : op_(op) {}
  CommandAwaiter(CommandAwaiter&& other) noexcept : op_(std::exchange(other.op_, nullptr)) {}
  CommandAwaiter(const CommandAwaiter&) = delete;
  CommandAwaiter& operator=(const CommandAwaiter&) = delete;
  ~CommandAwaiter();

  bool await_ready() const noexcept { return op_->stage == CommandOp::Stage::done; }
  void await_suspend(std::coroutine_handle<> waiter) noexcept { op_->waiter = waiter; }
  CommandResult await_resume();

 private:
  CommandOp* op_;
};

}  // namespace redlimit::detail
