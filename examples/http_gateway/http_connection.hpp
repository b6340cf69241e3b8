#pragma once
/// @file http_connection.hpp
/// Connection: one accepted TCP connection, its bytes parsed by http_parser.

#include <http_parser.h>
#include <uv.h>

#include <array>
#include <memory>
#include <string>

#include "http_message.hpp"
#include "redlimit/task.hpp"

namespace http_gateway {

class HttpServer;

/// One accepted TCP connection: reads bytes, parses requests with http_parser, hands each to
/// the server's RequestHandler, writes the responses and closes cleanly.
///
/// One request at a time: once a request is complete the parser is paused and reading stops
/// until its response is written. Why: responses must leave in request order, and a pipelining
/// client can then make us buffer at most one read. With keep-alive, the next request is parsed
/// from what is already buffered before reading resumes.
///
/// A request must arrive complete within the idle timeout. After the last response the
/// connection sends FIN and discards input until the peer closes or the linger timeout passes,
/// then closes (Why: closing a socket with unread input sends RST, which can destroy the
/// response before the client has read it).
///
/// Lifetime: shared. The connection holds itself while its uv handles are open, and so do the
/// coroutine handling a request and a write in flight; it ends when all of them are done.
class Connection : public std::enable_shared_from_this<Connection> {
  struct Private {};

 public:
  /// Accepts the pending connection on `listener` (the server's) and starts reading.
  static void accept(uv_stream_t* listener, HttpServer& server);

  /// Use accept(); public only for std::make_shared.
  Connection(Private, HttpServer& server);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// Takes no more requests: closes now when waiting for one, else after the current response.
  void shut_down();

 private:
  enum class State {
    reading,   ///< waiting for (the rest of) a request
    handling,  ///< the handler or the write of its response is in progress
    draining,  ///< the last response is out; waiting for the peer to close
    closed,    ///< uv_close() called on both handles
  };

  /// What a uv_write needs until its callback: the bytes, and the connection alive.
  struct PendingWrite {
    uv_write_t request;
    std::string bytes;
    std::shared_ptr<Connection> connection;
    bool keep_alive;
  };

  static const http_parser_settings& parser_settings();
  static int on_url(http_parser* parser, const char* at, size_t length);
  static int on_header_field(http_parser* parser, const char* at, size_t length);
  static int on_header_value(http_parser* parser, const char* at, size_t length);
  static int on_headers_complete(http_parser* parser);
  static int on_message_complete(http_parser* parser);

  static void on_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buffer);
  static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buffer);
  static void on_written(uv_write_t* request, int status);
  static void on_shutdown(uv_shutdown_t* request, int status);
  static void on_timeout(uv_timer_t* timer);
  static void on_closed(uv_handle_t* handle);

  /// Awaits the handler for `request` and sends its response.
  static redlimit::Task<void> respond(std::shared_ptr<Connection> self, Request request);

  uv_stream_t* stream() noexcept { return reinterpret_cast<uv_stream_t*>(&tcp_); }
  void read_peer_ip();
  void wait_for_request();
  void reset_request();
  void parse();
  void dispatch();
  void end_header();
  void send(const Response& response, bool head);
  void finish();
  void close();

  HttpServer& server_;
  State state_ = State::reading;
  uv_tcp_t tcp_{};
  uv_timer_t timer_{};
  uv_shutdown_t shutdown_{};
  int open_handles_ = 0;
  std::shared_ptr<Connection> self_;

  http_parser parser_{};
  std::array<char, 16384> read_buffer_{};
  std::string unparsed_;  ///< bytes read but not yet given to the parser (after a pause)
  std::string peer_ip_;
  Request request_;
  std::string header_field_;
  std::string header_value_;
  bool in_header_value_ = false;
  bool keep_alive_ = false;
  bool shutting_down_ = false;
};

}  // namespace http_gateway
