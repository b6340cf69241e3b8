#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>

#include "runtime/close_latch.hpp"
#include "runtime/uv_handle.hpp"

namespace redlimit::detail {

/// A uv handle owned by one object, made at construction (UvError when it cannot be):
/// `on_event(context)` runs on each event. close() reports to the latch once the handle's close
/// callback ran; a destructor that has to close the handle does not (the latch's owner is going
/// away with it).
template <class UvType>
class OwnedHandle {
 public:
  using Callback = void (*)(void* context);

  OwnedHandle(uv_loop_t* loop, Callback on_event, void* context, CloseLatch* latch);
  ~OwnedHandle() {
    if (handle_.is_open()) handle_.when_closed(nullptr, nullptr);
  }
  OwnedHandle(const OwnedHandle&) = delete;
  OwnedHandle& operator=(const OwnedHandle&) = delete;

  /// Idempotent.
  void close() noexcept { handle_.close(); }
  bool is_open() const noexcept { return handle_.is_open(); }
  UvType* get() noexcept { return handle_.get(); }
  void unref() noexcept { uv_unref(handle_.handle()); }

 protected:
  static void dispatch(UvType* uv) {
    auto* self = static_cast<OwnedHandle*>(uv->data);
    LoopScope scope;
    self->on_event_(self->context_);
  }
  UvHandle<UvType> handle_;

 private:
  Callback on_event_;
  void* context_;
};

/// A one-shot uv timer.
class Timer : public OwnedHandle<uv_timer_t> {
 public:
  using OwnedHandle::OwnedHandle;
  /// (Re)starts the timer; it fires once, `milliseconds` from now.
  void start(std::uint64_t milliseconds) noexcept {
    // Why: uv_timer_start counts from the loop's cached time, which may be stale.
    uv_update_time(handle_.get()->loop);
    uv_timer_start(handle_.get(), &dispatch, milliseconds, 0);
  }
  void stop() noexcept { uv_timer_stop(handle_.get()); }
  bool active() const noexcept { return uv_is_active(handle_.handle()) != 0; }
};

/// A uv idle handle: while started, `on_event` runs once per loop iteration and the loop polls
/// without blocking.
class Idle : public OwnedHandle<uv_idle_t> {
 public:
  using OwnedHandle::OwnedHandle;
  void start() noexcept { uv_idle_start(handle_.get(), &dispatch); }
  void stop() noexcept { uv_idle_stop(handle_.get()); }
};

}  // namespace redlimit::detail
