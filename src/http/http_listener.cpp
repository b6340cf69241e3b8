#include "redlimit/http_listener.hpp"

#include <algorithm>
#include <cctype>
#include <unordered_set>

#include "redlimit/errors.hpp"
#include "runtime/background_tasks.hpp"
#include "runtime/uv_handle.hpp"

namespace redlimit {
namespace {

using detail::UvHandle;

/// The longest request head read; a longer one is answered 431.
constexpr std::size_t max_head_bytes = 8 * 1024;
/// How long a connection may take to send its request.
constexpr std::uint64_t request_timeout_ms = 10'000;
/// How long a client may take to read its answer, and then to end its input (read on, and
/// dropped).
constexpr std::uint64_t linger_ms = 2'000;

std::string_view reason_of(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 413:
      return "Content Too Large";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

std::string response_text(const HttpResponse& response, bool head_only) {
  std::string text =
      "HTTP/1.1 " + std::to_string(response.status) + " " +
      std::string(reason_of(response.status)) + "\r\nContent-Type: " + response.content_type +
      "\r\nContent-Length: " + std::to_string(response.body.size()) + "\r\nConnection: close\r\n";
  for (const HeaderField& field : response.headers)
    text += field.name + ": " + field.value + "\r\n";
  text += "\r\n";
  if (!head_only) text += response.body;
  return text;
}

HttpResponse plain(int status) {
  return HttpResponse{.status = status, .body = std::string(reason_of(status)) + "\n"};
}

bool same_name(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

/// The request line and the fields of `head` (up to its blank line); false when it is not
/// HTTP/1.x. `body_length` is Content-Length (0 without one); `chunked` is set for a chunked
/// body, which is not read.
bool parse_head(std::string_view head, HttpRequest& request, std::size_t& body_length,
                bool& chunked) {
  std::size_t line_end = head.find("\r\n");
  const std::string_view line = head.substr(0, line_end);
  const std::size_t first = line.find(' ');
  const std::size_t second = first == std::string_view::npos ? first : line.find(' ', first + 1);
  if (second == std::string_view::npos || !line.substr(second + 1).starts_with("HTTP/1.")) {
    return false;
  }
  request.method = std::string(line.substr(0, first));
  request.target = std::string(line.substr(first + 1, second - first - 1));
  body_length = 0;
  chunked = false;
  while (line_end != std::string_view::npos && line_end + 2 < head.size()) {
    const std::size_t start = line_end + 2;
    line_end = head.find("\r\n", start);
    const std::string_view field = head.substr(start, line_end - start);
    const std::size_t colon = field.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view value = field.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
      value.remove_suffix(1);
    if (same_name(field.substr(0, colon), "Content-Length")) {
      if (value.empty() || value.size() > 12 ||
          value.find_first_not_of("0123456789") != std::string_view::npos) {
        return false;
      }
      body_length = std::stoull(std::string(value));
    } else if (same_name(field.substr(0, colon), "Transfer-Encoding")) {
      chunked = true;
    }
  }
  return true;
}

}  // namespace

struct HttpListener::State {
  /// One accepted connection: reads one request, writes one response, closes. It frees itself
  /// once both its handles are freed.
  struct Connection {
    State* owner;  ///< null once the listener closed it
    UvHandle<uv_tcp_t> tcp;
    UvHandle<uv_timer_t> timer;
    int open = 0;  ///< handles not yet freed
    /// Whether a response may still be written: a handler answering later checks it.
    std::shared_ptr<bool> alive = std::make_shared<bool>(true);
    std::string received;
    std::size_t head_end = std::string::npos;  ///< where the body begins, once read
    std::size_t body_length = 0;
    HttpRequest request;
    bool head_only = false;
    /// Its request read whole, or refused before that: what comes after is read and dropped
    /// until the client closes (or linger_ms pass after the answer). Why: closed with input
    /// unread, the connection would be reset, and the client would lose the part of the answer
    /// it had not read yet.
    bool lingering = false;
    /// The client ended its input before the answer was written: closed once it is.
    bool input_ended = false;
    bool answered = false;  ///< the answer is written: the client's end of input closes it
    std::string response;
    uv_write_t write{};
    uv_shutdown_t shutdown{};
    char chunk[4096];

    explicit Connection(State* owner_) : owner(owner_) {}

    void close() noexcept {
      *alive = false;
      if (owner != nullptr) owner->connections.erase(this);
      owner = nullptr;
      tcp.close();
      timer.close();
    }

    static void freed(void* self) noexcept {
      auto* connection = static_cast<Connection*>(self);
      if (--connection->open == 0) delete connection;
    }
  };

  uv_loop_t* loop;
  HttpHandler handler;
  HttpListenerOptions options;
  UvHandle<uv_tcp_t> listener;
  std::unordered_set<Connection*> connections;

  static void on_connection(uv_stream_t* server, int status) {
    auto* state = static_cast<State*>(server->data);
    if (status < 0) return;
    auto* connection = new Connection(state);
    try {
      connection->tcp.init(state->loop, uv_tcp_init);
      connection->tcp.when_closed(&Connection::freed, connection);
      ++connection->open;
      connection->timer.init(state->loop, uv_timer_init);
      connection->timer.when_closed(&Connection::freed, connection);
      ++connection->open;
    } catch (const Error&) {
      // Why: the loop cannot open a handle (out of file descriptors); the client retries.
      if (connection->open == 0) {
        delete connection;
        return;
      }
      connection->close();
      return;
    }
    state->connections.insert(connection);
    connection->tcp.get()->data = connection;
    connection->timer.get()->data = connection;
    auto* stream = reinterpret_cast<uv_stream_t*>(connection->tcp.get());
    if (uv_accept(server, stream) != 0 || uv_read_start(stream, &on_alloc, &on_read) != 0 ||
        uv_timer_start(connection->timer.get(), &on_timeout, request_timeout_ms, 0) != 0) {
      connection->close();
    }
  }

  static void on_alloc(uv_handle_t* handle, std::size_t, uv_buf_t* buffer) {
    auto* connection = static_cast<Connection*>(handle->data);
    *buffer = uv_buf_init(connection->chunk, sizeof connection->chunk);
  }

  static void on_read(uv_stream_t* stream, ssize_t read, const uv_buf_t* buffer) {
    auto* connection = static_cast<Connection*>(stream->data);
    if (read == UV_EOF && connection->owner != nullptr && connection->lingering &&
        !connection->answered) {
      // Why not closed: a client may end its input once it sent the request; its answer comes.
      uv_read_stop(stream);
      connection->input_ended = true;
      return;
    }
    if (read < 0 || connection->owner == nullptr) {
      connection->close();
      return;
    }
    Connection& c = *connection;
    if (c.lingering) return;
    c.received.append(buffer->base, static_cast<std::size_t>(read));
    if (c.head_end == std::string::npos) {
      const std::size_t end = c.received.find("\r\n\r\n");
      if (end == std::string::npos && c.received.size() <= max_head_bytes) return;
      if (end == std::string::npos || end + 4 > max_head_bytes) return refuse(c, 431);
      bool chunked = false;
      if (!parse_head(std::string_view(c.received).substr(0, end + 2), c.request, c.body_length,
                      chunked) ||
          chunked) {
        return refuse(c, 400);
      }
      c.head_only = c.request.method == "HEAD";
      if (c.body_length > c.owner->options.max_body_bytes) return refuse(c, 413);
      c.head_end = end + 4;
    }
    if (c.received.size() - c.head_end < c.body_length) return;
    c.request.body = c.received.substr(c.head_end, c.body_length);
    c.received = {};
    c.lingering = true;
    // Why before the handler: an answer given at once starts the timer again, for the linger.
    if (uv_timer_start(c.timer.get(), &on_response_timeout,
                       static_cast<std::uint64_t>(c.owner->options.response_timeout.count()),
                       0) != 0) {
      c.close();
      return;
    }
    std::weak_ptr<bool> alive = c.alive;
    // Why caught: an exception must not unwind through libuv's frames (the loop would be left
    // mid-iteration); the request is answered 500 unless the handler answered it already.
    try {
      c.owner->handler(std::move(c.request), [connection, alive](HttpResponse response) {
        if (const auto still = alive.lock(); still && *still) respond(*connection, response);
      });
    } catch (...) {
      if (const auto still = alive.lock(); still && *still) respond(c, plain(500));
      detail::report_error(std::current_exception());
    }
  }

  /// Answers `status` to a request refused before it was read whole, and lingers.
  static void refuse(Connection& connection, int status) {
    connection.received.clear();
    connection.lingering = true;
    respond(connection, plain(status));
  }

  /// Writes `response`; a client that does not read it within linger_ms is closed.
  static void respond(Connection& connection, const HttpResponse& response) {
    auto* stream = reinterpret_cast<uv_stream_t*>(connection.tcp.get());
    if (uv_timer_start(connection.timer.get(), &on_timeout, linger_ms, 0) != 0) {
      connection.close();
      return;
    }
    connection.response = response_text(response, connection.head_only);
    uv_buf_t buffer = uv_buf_init(connection.response.data(),
                                  static_cast<unsigned int>(connection.response.size()));
    connection.write.data = &connection;
    *connection.alive = false;  // one response per connection
    if (uv_write(&connection.write, stream, &buffer, 1, &on_written) != 0) connection.close();
  }

  static void on_written(uv_write_t* request, int status) {
    // Why the connection is still here: it frees itself only once its handles are freed, and
    // libuv runs a write's callback (UV_ECANCELED on a close) before the handle's close callback.
    auto* connection = static_cast<Connection*>(request->data);
    if (status == 0 && !connection->input_ended && connection->owner != nullptr) {
      // The answer is followed by the end of the stream; the client's input is read on until
      // it ends (or linger_ms pass).
      connection->answered = true;
      auto* stream = reinterpret_cast<uv_stream_t*>(connection->tcp.get());
      if (uv_timer_start(connection->timer.get(), &on_timeout, linger_ms, 0) == 0 &&
          uv_shutdown(&connection->shutdown, stream, [](uv_shutdown_t*, int) {}) == 0) {
        return;
      }
    }
    connection->close();
  }

  static void on_timeout(uv_timer_t* timer) { static_cast<Connection*>(timer->data)->close(); }

  /// The handler did not answer in time: 503, and its answer, if it comes, is dropped.
  static void on_response_timeout(uv_timer_t* timer) {
    respond(*static_cast<Connection*>(timer->data), plain(503));
  }

  void close() noexcept {
    listener.close();
    const auto open = std::exchange(connections, {});
    for (Connection* connection : open) {
      connection->owner = nullptr;
      connection->close();
    }
  }
};

HttpListener::HttpListener(uv_loop_t* loop, HttpHandler handler, HttpListenerOptions options)
    : state_(std::make_unique<State>()) {
  if (options.port < 0 || options.port > 65535) {
    throw ConfigError("HttpListener: port " + std::to_string(options.port) + " is outside 0-65535");
  }
  if (options.response_timeout <= std::chrono::milliseconds::zero()) {
    throw ConfigError("HttpListener: response_timeout must be positive, not " +
                      std::to_string(options.response_timeout.count()) + " ms");
  }
  sockaddr_storage address{};
  if (uv_ip4_addr(options.host.c_str(), options.port, reinterpret_cast<sockaddr_in*>(&address)) !=
          0 &&
      uv_ip6_addr(options.host.c_str(), options.port, reinterpret_cast<sockaddr_in6*>(&address)) !=
          0) {
    throw ConfigError("HttpListener: host '" + options.host + "' is not an IPv4 or IPv6 address");
  }
  State& state = *state_;
  state.loop = loop;
  state.handler = std::move(handler);
  state.options = std::move(options);
  state.listener.init(loop, uv_tcp_init);
  state.listener.get()->data = &state;
  const int bound = uv_tcp_bind(state.listener.get(), reinterpret_cast<sockaddr*>(&address), 0);
  const int listening = bound != 0 ? bound
                                   : uv_listen(reinterpret_cast<uv_stream_t*>(state.listener.get()),
                                               128, &State::on_connection);
  if (listening != 0) {
    state.listener.close();
    throw Error("HttpListener: cannot listen on " + state.options.host + " port " +
                std::to_string(state.options.port) + ": " + uv_strerror(listening));
  }
}

HttpListener::~HttpListener() {
  close();
}

int HttpListener::port() const noexcept {
  if (!state_->listener.is_open()) return 0;
  sockaddr_storage address{};
  int length = sizeof address;
  if (uv_tcp_getsockname(state_->listener.get(), reinterpret_cast<sockaddr*>(&address), &length) !=
      0) {
    return 0;
  }
  const auto* ip4 = reinterpret_cast<const sockaddr_in*>(&address);
  const auto* ip6 = reinterpret_cast<const sockaddr_in6*>(&address);
  return ntohs(address.ss_family == AF_INET6 ? ip6->sin6_port : ip4->sin_port);
}

void HttpListener::close() noexcept {
  state_->close();
}

}  // namespace redlimit
