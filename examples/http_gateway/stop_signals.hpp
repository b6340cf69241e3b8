#pragma once
/// @file stop_signals.hpp
/// StopSignals: SIGINT and SIGTERM as something a coroutine can await.

#include <uv.h>

#include <array>
#include <stop_token>

#include "redlimit/task.hpp"

namespace http_gateway {

/// Watches SIGINT and SIGTERM on the loop. Call close() and wait until closed() before
/// destroying it. Use on the loop's thread.
class StopSignals {
 public:
  explicit StopSignals(uv_loop_t* loop);
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  /// Completes once SIGINT or SIGTERM has arrived (at once if one already has).
  redlimit::Task<void> wait();
  /// Stops watching and closes the handles. Idempotent.
  void close();
  /// True once close() has finished, a loop iteration after it was called.
  bool closed() const noexcept { return open_handles_ == 0; }

 private:
  static void on_signal(uv_signal_t* handle, int signal);
  static void on_closed(uv_handle_t* handle);

  uv_loop_t* loop_;
  std::array<uv_signal_t, 2> handles_{};
  int open_handles_ = 0;
  bool closing_ = false;
  std::stop_source stop_;
};

}  // namespace http_gateway
