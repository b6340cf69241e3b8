#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>

#include "runtime/close_latch.hpp"

namespace redlimit::detail {

/// A uv handle owned by one object. The handle lives on the heap and frees itself in its close
/// callback, so the owner may go away right after close(). `on_event(context)` runs on each
/// event. close() reports to the latch; a destructor that has to close the handle does not
/// (the latch's owner is going away with it).
template <class UvType>
class OwnedHandle {
 public:
  using Callback = void (*)(void* context);

  OwnedHandle(uv_loop_t* loop, Callback on_event, void* context, CloseLatch* latch);
  ~OwnedHandle() {
    if (handle_ != nullptr) handle_->latch = nullptr;
    close();
  }
  OwnedHandle(const OwnedHandle&) = delete;
  OwnedHandle& operator=(const OwnedHandle&) = delete;

  /// Idempotent.
  void close() noexcept {
    if (auto* handle = std::exchange(handle_, nullptr)) {
      uv_close(reinterpret_cast<uv_handle_t*>(&handle->uv), &on_closed);
    }
  }
  bool is_open() const noexcept { return handle_ != nullptr; }
  UvType* get() noexcept { return &handle_->uv; }
  void unref() noexcept { uv_unref(reinterpret_cast<uv_handle_t*>(&handle_->uv)); }

 protected:
  struct Handle {
    UvType uv;
    Callback on_event;
    void* context;
    CloseLatch* latch;
  };
  static void dispatch(UvType* uv) {
    auto* handle = static_cast<Handle*>(uv->data);
    LoopScope scope;
    handle->on_event(handle->context);
  }
  Handle* handle_ = nullptr;

 private:
  static void on_closed(uv_handle_t* uv) {
    auto* handle = static_cast<Handle*>(uv->data);
    CloseLatch* latch = handle->latch;
    delete handle;
    if (latch != nullptr) latch->closed();
  }
};

/// A one-shot uv timer.
class Timer : public OwnedHandle<uv_timer_t> {
 public:
  using OwnedHandle::OwnedHandle;
  /// (Re)starts the timer; it fires once, `milliseconds` from now.
  void start(std::uint64_t milliseconds) noexcept {
    // Why: uv_timer_start counts from the loop's cached time, which may be stale.
    uv_update_time(handle_->uv.loop);
    uv_timer_start(&handle_->uv, &dispatch, milliseconds, 0);
  }
  void stop() noexcept { uv_timer_stop(&handle_->uv); }
  bool active() const noexcept {
    return uv_is_active(reinterpret_cast<const uv_handle_t*>(&handle_->uv)) != 0;
  }
};

/// A uv idle handle: while started, `on_event` runs once per loop iteration and the loop polls
/// without blocking.
class Idle : public OwnedHandle<uv_idle_t> {
 public:
  using OwnedHandle::OwnedHandle;
  void start() noexcept { uv_idle_start(&handle_->uv, &dispatch); }
  void stop() noexcept { uv_idle_stop(&handle_->uv); }
};

}  // namespace redlimit::detail
