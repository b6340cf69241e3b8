#pragma once

#include <uv.h>

#include <cassert>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "redlimit/errors.hpp"

namespace redlimit::detail {

/// A uv call failed: the message names it and libuv's reason; code() is libuv's error code.
class UvError : public Error {
 public:
  UvError(const std::string& message, int code) : Error(message), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

/// The uv_handle_type of each handle struct the library uses.
template <class T>
inline constexpr uv_handle_type uv_type_of = UV_UNKNOWN_HANDLE;
template <>
inline constexpr uv_handle_type uv_type_of<uv_timer_t> = UV_TIMER;
template <>
inline constexpr uv_handle_type uv_type_of<uv_idle_t> = UV_IDLE;
template <>
inline constexpr uv_handle_type uv_type_of<uv_prepare_t> = UV_PREPARE;
template <>
inline constexpr uv_handle_type uv_type_of<uv_poll_t> = UV_POLL;
template <>
inline constexpr uv_handle_type uv_type_of<uv_pipe_t> = UV_NAMED_PIPE;
template <>
inline constexpr uv_handle_type uv_type_of<uv_tcp_t> = UV_TCP;

/// Throws the UvError of a failed uv_*_init of a `type` handle.
[[noreturn]] void throw_init_failed(uv_handle_type type, int code);

/// The one way the library owns a uv handle (uvw's Handle is the model). The handle lives on the
/// heap, apart from its owner: libuv may only free it after its close callback, a loop
/// iteration after uv_close(), and by then the owner may be gone. So close() hands the memory
/// to the close callback, which frees it and then runs the hook set with when_closed().
///
/// - init() checks uv_*_init: a failure throws UvError and leaves nothing open (a handle whose
///   init failed is freed, never closed).
/// - close() is idempotent, and does nothing on a handle never initialised; the destructor
///   closes.
/// - The handle's `data` is the owner's (its callbacks find their object there).
///
/// Neither copyable nor movable: it belongs to one owner for its life. Use on the loop's thread.
template <class T>
class UvHandle {
  static_assert(uv_type_of<T> != UV_UNKNOWN_HANDLE, "not a uv handle type the library knows");

 public:
  /// Runs from the close callback, after the handle's memory was freed.
  using OnClosed = void (*)(void* context) noexcept;

  UvHandle() noexcept = default;
  ~UvHandle() { close(); }
  UvHandle(const UvHandle&) = delete;
  UvHandle& operator=(const UvHandle&) = delete;

  /// Makes the handle with `init(loop, handle, arguments...)` (uv_timer_init, uv_pipe_init,
  /// ...). Throws UvError when that fails; the handle then stays closed. Call while closed.
  template <class Init, class... Arguments>
  void init(uv_loop_t* loop, Init init, Arguments... arguments) {
    assert(node_ == nullptr && "UvHandle::init() on an open handle");
    auto* node = new Node{};
    if (const int code = init(loop, &node->uv, arguments...); code != 0) {
      delete node;  // Why not closed: libuv never took it.
      throw_init_failed(uv_type_of<T>, code);
    }
    node_ = node;
  }

  /// Closes the handle: no callback of it runs any more, except the hook set with
  /// when_closed(), a loop iteration later. Idempotent; nothing to do when never initialised.
  void close() noexcept {
    if (Node* node = std::exchange(node_, nullptr)) {
      uv_close(reinterpret_cast<uv_handle_t*>(&node->uv), &on_closed);
    }
  }

  /// `on_closed(context)` runs once the close callback has freed the handle (a latch counting
  /// open handles, an owner that frees itself after its last one). Replaces the previous hook;
  /// null removes it. Only while open.
  void when_closed(OnClosed on_closed, void* context) noexcept {
    assert(node_ != nullptr);
    node_->on_closed = on_closed;
    node_->context = context;
  }

  /// Initialised and not closed.
  bool is_open() const noexcept { return node_ != nullptr; }
  /// The handle; null when not open.
  T* get() const noexcept { return node_ != nullptr ? &node_->uv : nullptr; }
  /// The handle as a uv_handle_t; null when not open.
  uv_handle_t* handle() const noexcept { return reinterpret_cast<uv_handle_t*>(get()); }

 private:
  struct Node {
    T uv;
    OnClosed on_closed = nullptr;
    void* context = nullptr;
  };
  // Why: the close callback gets the handle's address and finds its node there.
  static_assert(std::is_standard_layout_v<Node> && offsetof(Node, uv) == 0);

  static void on_closed(uv_handle_t* handle) {
    auto* node = reinterpret_cast<Node*>(handle);
    const OnClosed hook = node->on_closed;
    void* const context = node->context;
    delete node;
    if (hook != nullptr) hook(context);
  }

  Node* node_ = nullptr;
};

}  // namespace redlimit::detail
