#pragma once
/// @file http_listener.hpp
/// HttpListener: a small HTTP/1.1 server on the loop, for what a service built on redlimit
/// answers beside its work: health checks, metrics (see MetricsEndpoint), a JSON API.

#include <uv.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "redlimit/ratelimit_fields.hpp"

namespace redlimit {

/// One request as the handler sees it.
struct HttpRequest {
  std::string method;  ///< e.g. "GET"
  std::string target;  ///< as sent, e.g. "/metrics" or "/json?x=1"
  std::string body;    ///< by Content-Length (no chunked bodies)
};

/// One response; the listener adds Content-Length and `Connection: close`, and leaves the body
/// out for HEAD.
struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::vector<HeaderField> headers{};
  std::string body{};
};

/// Answers one request by calling `respond` once, on the loop's thread, now or later (a
/// response for a connection gone meanwhile is dropped). An exception it throws goes to the
/// error handler (see set_error_handler), and the request, unless answered, gets 500.
using HttpHandler =
    std::function<void(HttpRequest request, std::function<void(HttpResponse)> respond)>;

/// Where an HttpListener listens and what it reads.
struct HttpListenerOptions {
  std::string host = "127.0.0.1";  ///< an IPv4 or IPv6 address (not a name)
  int port = 0;                    ///< 0: a free port, see HttpListener::port()
  std::size_t max_body_bytes = 1 << 20;
  /// How long the handler may take to answer a request; then the listener answers 503 and
  /// drops the handler's later answer.
  std::chrono::milliseconds response_timeout{30'000};
};

/// Serves one request per connection (`Connection: close`): reads the request head (at most
/// 8 KiB; else 431) and a body of Content-Length bytes (at most max_body_bytes; else 413), and
/// hands them to the handler. A request it cannot read gets 400; a connection that sends no
/// whole request within 10 s is closed; a request the handler does not answer within
/// response_timeout gets 503. After a 400, 413 or 431 it reads on and drops what the
/// client still sends, until the client closes or 2 s pass, so that a client still sending its
/// request gets the answer, not a reset connection.
///
/// Not movable; use it on its loop's thread. Destroying it closes it.
class HttpListener {
 public:
  /// Listens at once. Throws ConfigError for a host that is not an IP address, a port outside
  /// 0-65535 or a response_timeout not above 0, and Error when it cannot listen (the port is
  /// taken).
  HttpListener(uv_loop_t* loop, HttpHandler handler, HttpListenerOptions options = {});
  ~HttpListener();
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  /// The port it listens on (the one the system chose for port 0); 0 once closed.
  int port() const noexcept;
  /// Stops listening and closes every open connection (a response not yet written is dropped);
  /// their handles are freed by the loop's next iteration. Idempotent.
  void close() noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace redlimit
