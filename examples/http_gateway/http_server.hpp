#pragma once
/// @file http_server.hpp
/// HttpServer: the listening socket and the connections it accepted.

#include <uv.h>

#include <string>
#include <unordered_set>

#include "http_message.hpp"

namespace http_gateway {

class Connection;

/// Listens on a TCP address and gives every request it receives to a RequestHandler.
///
/// Lifetime: the handler must outlive the server; call stop() and wait until stopped() before
/// destroying it (its listener and its connections' handles close in later loop iterations).
/// Use on the loop's thread.
class HttpServer {
 public:
  HttpServer(uv_loop_t* loop, RequestHandler& handler);
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Binds to `host` (an IPv4 or IPv6 address) and `port` (0: any free port) and starts
  /// accepting. Throws std::runtime_error naming the step that failed.
  void listen(const std::string& host, int port);
  /// The port it listens on (after listen()).
  int port() const noexcept { return port_; }
  /// Stops accepting, closes connections that wait for a request and lets the others finish
  /// the response in progress. Idempotent.
  void stop();
  /// True once stop() has closed the listener and every connection is gone.
  bool stopped() const noexcept { return listener_closed_ && connections_.empty(); }

 private:
  friend class Connection;

  static void on_connection(uv_stream_t* listener, int status);

  uv_loop_t* loop_;
  RequestHandler& handler_;
  uv_tcp_t listener_{};
  int port_ = 0;
  bool stopping_ = false;
  bool listener_closed_ = false;
  std::unordered_set<Connection*> connections_;  ///< registered by each Connection's lifetime
};

}  // namespace http_gateway
