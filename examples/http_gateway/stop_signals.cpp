#include "stop_signals.hpp"

#include <chrono>
#include <csignal>

#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"

namespace http_gateway {

StopSignals::StopSignals(uv_loop_t* loop) : loop_(loop) {
  const std::array<int, 2> signals{SIGINT, SIGTERM};
  for (std::size_t i = 0; i < handles_.size(); ++i) {
    uv_signal_init(loop_, &handles_[i]);
    handles_[i].data = this;
    ++open_handles_;
    uv_signal_start(&handles_[i], &on_signal, signals[i]);
  }
}

redlimit::Task<void> StopSignals::wait() {
  while (!stop_.stop_requested()) {
    try {
      co_await redlimit::sleep_for(loop_, std::chrono::hours(1), stop_.get_token());
    } catch (const redlimit::Cancelled&) {
      // the stop request: the loop condition ends the wait
    }
  }
}

void StopSignals::close() {
  if (closing_) return;
  closing_ = true;
  for (uv_signal_t& handle : handles_) {
    uv_close(reinterpret_cast<uv_handle_t*>(&handle), &on_closed);
  }
}

void StopSignals::on_signal(uv_signal_t* handle, int) {
  static_cast<StopSignals*>(handle->data)->stop_.request_stop();
}

void StopSignals::on_closed(uv_handle_t* handle) {
  --static_cast<StopSignals*>(handle->data)->open_handles_;
}

}  // namespace http_gateway
