#include "http_connection.hpp"

#include <strings.h>

#include <cstdio>
#include <optional>
#include <string_view>
#include <vector>

#include "http_server.hpp"
#include "redlimit/runtime.hpp"

namespace http_gateway {
namespace {

/// How long a connection may wait for a complete request.
constexpr std::uint64_t idle_timeout_ms = 10000;
/// How long a closing connection waits for the peer to close after the last response.
constexpr std::uint64_t linger_timeout_ms = 2000;

Connection* connection_of(http_parser* parser) {
  return static_cast<Connection*>(parser->data);
}

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return {};
  const auto last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

}  // namespace

const http_parser_settings& Connection::parser_settings() {
  static const http_parser_settings settings = [] {
    http_parser_settings s;
    http_parser_settings_init(&s);
    s.on_url = &Connection::on_url;
    s.on_header_field = &Connection::on_header_field;
    s.on_header_value = &Connection::on_header_value;
    s.on_headers_complete = &Connection::on_headers_complete;
    s.on_message_complete = &Connection::on_message_complete;
    return s;
  }();
  return settings;
}

Connection::Connection(Private, HttpServer& server) : server_(server) {
  server_.connections_.insert(this);
}

Connection::~Connection() {
  server_.connections_.erase(this);
}

void Connection::accept(uv_stream_t* listener, HttpServer& server) {
  auto connection = std::make_shared<Connection>(Private{}, server);
  Connection& c = *connection;
  uv_tcp_init(server.loop_, &c.tcp_);
  uv_timer_init(server.loop_, &c.timer_);
  c.tcp_.data = &c;
  c.timer_.data = &c;
  c.open_handles_ = 2;
  c.self_ = std::move(connection);
  if (uv_accept(listener, c.stream()) != 0) {
    c.close();
    return;
  }
  uv_tcp_nodelay(&c.tcp_, 1);
  c.read_peer_ip();
  http_parser_init(&c.parser_, HTTP_REQUEST);
  c.parser_.data = &c;
  c.reset_request();
  c.wait_for_request();
}

void Connection::read_peer_ip() {
  sockaddr_storage address{};
  int length = sizeof address;
  char text[INET6_ADDRSTRLEN] = "unknown";
  if (uv_tcp_getpeername(&tcp_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    if (address.ss_family == AF_INET6) {
      uv_ip6_name(reinterpret_cast<const sockaddr_in6*>(&address), text, sizeof text);
    } else {
      uv_ip4_name(reinterpret_cast<const sockaddr_in*>(&address), text, sizeof text);
    }
  }
  peer_ip_ = text;
}

void Connection::shut_down() {
  shutting_down_ = true;
  if (state_ == State::reading) close();
}

void Connection::wait_for_request() {
  state_ = State::reading;
  uv_timer_start(&timer_, &on_timeout, idle_timeout_ms, 0);
  if (uv_read_start(stream(), &on_alloc, &on_read) != 0) close();
}

void Connection::reset_request() {
  request_ = Request{};
  request_.peer_ip = peer_ip_;
  header_field_.clear();
  header_value_.clear();
  in_header_value_ = false;
  keep_alive_ = false;
}

void Connection::parse() {
  // Why: http_parser_execute() with no bytes means "end of input", so only data is fed to it.
  if (unparsed_.empty()) return;
  const size_t used =
      http_parser_execute(&parser_, &parser_settings(), unparsed_.data(), unparsed_.size());
  unparsed_.erase(0, used);
  const auto error = HTTP_PARSER_ERRNO(&parser_);
  if (error == HPE_PAUSED) {  // on_message_complete paused it: a whole request is here
    dispatch();
  } else if (error != HPE_OK) {
    request_.malformed = true;
    keep_alive_ = false;
    unparsed_.clear();
    dispatch();
  }
}

void Connection::dispatch() {
  state_ = State::handling;
  uv_read_stop(stream());
  uv_timer_stop(&timer_);
  redlimit::spawn(tcp_.loop, respond(shared_from_this(), std::move(request_)));
}

redlimit::Task<void> Connection::respond(std::shared_ptr<Connection> self, Request request) {
  std::optional<Response> response;
  try {
    redlimit::Task<Response> pending = self->server_.handler_.handle(request);
    response = co_await std::move(pending);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "http_gateway: the request handler failed: %s\n", e.what());
  }
  if (response) {
    self->send(*response, request.head);
  } else {
    self->close();
  }
}

void Connection::send(const Response& response, bool head) {
  const bool keep_alive = keep_alive_ && !shutting_down_;
  auto* write =
      new PendingWrite{{}, serialize(response, keep_alive, head), shared_from_this(), keep_alive};
  write->request.data = write;
  uv_buf_t buffer = uv_buf_init(write->bytes.data(), static_cast<unsigned>(write->bytes.size()));
  if (uv_write(&write->request, stream(), &buffer, 1, &on_written) != 0) {
    delete write;
    close();
  }
}

void Connection::on_written(uv_write_t* request, int status) {
  const std::unique_ptr<PendingWrite> write(static_cast<PendingWrite*>(request->data));
  Connection& c = *write->connection;
  if (status < 0) {  // also UV_ECANCELED: the connection was closed meanwhile
    c.close();
  } else if (!write->keep_alive) {
    c.finish();
  } else {
    c.reset_request();
    http_parser_pause(&c.parser_, 0);
    c.state_ = State::reading;
    c.parse();  // a pipelined request may be buffered already, and then is dispatched
    if (c.state_ == State::reading) c.wait_for_request();
  }
}

void Connection::finish() {
  state_ = State::draining;
  unparsed_.clear();
  if (uv_shutdown(&shutdown_, stream(), &on_shutdown) != 0) close();
}

void Connection::on_shutdown(uv_shutdown_t* request, int status) {
  Connection& c = *static_cast<Connection*>(request->handle->data);
  if (status < 0) {
    c.close();
    return;
  }
  uv_timer_start(&c.timer_, &on_timeout, linger_timeout_ms, 0);
  if (uv_read_start(c.stream(), &on_alloc, &on_read) != 0) c.close();
}

void Connection::close() {
  if (state_ == State::closed) return;
  state_ = State::closed;
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), &on_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&timer_), &on_closed);
}

void Connection::on_closed(uv_handle_t* handle) {
  Connection& c = *static_cast<Connection*>(handle->data);
  // Why: this may drop the last reference and destroy c; nothing touches it afterwards.
  if (--c.open_handles_ == 0) c.self_.reset();
}

void Connection::on_timeout(uv_timer_t* timer) {
  static_cast<Connection*>(timer->data)->close();
}

void Connection::on_alloc(uv_handle_t* handle, size_t, uv_buf_t* buffer) {
  auto& c = *static_cast<Connection*>(handle->data);
  *buffer = uv_buf_init(c.read_buffer_.data(), static_cast<unsigned>(c.read_buffer_.size()));
}

void Connection::on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buffer) {
  Connection& c = *static_cast<Connection*>(stream->data);
  if (nread < 0) {  // EOF or an error: between requests, inside one, or while draining
    c.close();
  } else if (nread > 0 && c.state_ == State::reading) {
    c.unparsed_.append(buffer->base, static_cast<size_t>(nread));
    c.parse();
  }
}

int Connection::on_url(http_parser* parser, const char* at, size_t length) {
  connection_of(parser)->request_.target.append(at, length);
  return 0;
}

int Connection::on_header_field(http_parser* parser, const char* at, size_t length) {
  Connection& c = *connection_of(parser);
  if (c.in_header_value_) c.end_header();
  c.header_field_.append(at, length);
  return 0;
}

int Connection::on_header_value(http_parser* parser, const char* at, size_t length) {
  Connection& c = *connection_of(parser);
  c.in_header_value_ = true;
  c.header_value_.append(at, length);
  return 0;
}

int Connection::on_headers_complete(http_parser* parser) {
  Connection& c = *connection_of(parser);
  if (c.in_header_value_) c.end_header();
  c.request_.method = http_method_str(static_cast<http_method>(parser->method));
  c.request_.head = parser->method == HTTP_HEAD;
  return 0;
}

int Connection::on_message_complete(http_parser* parser) {
  Connection& c = *connection_of(parser);
  c.keep_alive_ = http_should_keep_alive(parser) != 0;
  http_parser_pause(parser, 1);
  return 0;
}

void Connection::end_header() {
  if (request_.api_key.empty() && strcasecmp(header_field_.c_str(), "X-API-Key") == 0) {
    request_.api_key = trimmed(header_value_);
  }
  header_field_.clear();
  header_value_.clear();
  in_header_value_ = false;
}

}  // namespace http_gateway
