#pragma once
// A dispatcher node's TCP connection to the provider: sends "SEND" lines and hands each reply
// (accepted or rejected) to a callback. Plain libuv; connect() is awaitable from a coroutine.

#include <uv.h>

#include <coroutine>
#include <functional>
#include <string>

/// The provider's answer to one message, or the end of the connection.
enum class Reply { accepted, rejected, connection_lost };

/// One connection to the provider on 127.0.0.1. Use on the loop's thread.
class ProviderLink {
 public:
  /// `on_reply` gets each answer in sending order, and connection_lost once if the provider
  /// goes away (then no more answers come).
  ProviderLink(uv_loop_t* loop, std::function<void(Reply)> on_reply);
  ProviderLink(const ProviderLink&) = delete;
  ProviderLink& operator=(const ProviderLink&) = delete;
  ~ProviderLink();

  /// `co_await link.connect(port)`: 0 once connected, else a libuv error code.
  auto connect(int port) {
    struct Awaiter {
      ProviderLink& link;
      int port;
      int status = 0;
      bool await_ready() const noexcept { return false; }
      bool await_suspend(std::coroutine_handle<> waiting) {
        status = link.start_connect(port, [this, waiting](int result) {
          status = result;
          waiting.resume();
        });
        return status == 0;  // a connect that failed at once does not suspend
      }
      int await_resume() const noexcept { return status; }
    };
    return Awaiter{*this, port};
  }
  /// Queues one message line (copied).
  void send(std::string line);
  /// Closes the connection (the provider sees EOF).
  void close();

 private:
  /// Starts connecting; `done` gets the outcome later. Returns a libuv error code, without
  /// calling `done`, if the attempt cannot even start.
  int start_connect(int port, std::function<void(int)> done);

  uv_tcp_t* handle_;  ///< on the heap: freed in its close callback, which may run after us
  std::function<void(Reply)> on_reply_;
  std::function<void(int)> on_connected_;
  std::string pending_;
  bool closed_ = false;
};
