#include "redlimit/metrics_endpoint.hpp"

#include <cstring>
#include <unordered_set>

#include "runtime/uv_handle.hpp"

namespace redlimit {
namespace {

using detail::UvHandle;

/// The longest request head read; a longer one is answered 431.
constexpr std::size_t max_head_bytes = 8 * 1024;
/// How long a connection may take to send its request head.
constexpr std::uint64_t head_timeout_ms = 10'000;

/// What a response says, before it is written.
struct Answer {
  int status = 200;
  std::string reason{};
  std::string content_type = "text/plain; charset=utf-8";
  std::string body{};
  bool head_only = false;  ///< HEAD: the body's length, not the body
};

std::string response_text(const Answer& answer) {
  std::string text = "HTTP/1.1 " + std::to_string(answer.status) + " " + answer.reason +
                     "\r\nContent-Type: " + answer.content_type +
                     "\r\nContent-Length: " + std::to_string(answer.body.size()) +
                     "\r\nConnection: close\r\n";
  if (answer.status == 405) text += "Allow: GET, HEAD\r\n";
  text += "\r\n";
  if (!answer.head_only) text += answer.body;
  return text;
}

Answer plain(int status, std::string reason) {
  Answer answer{.status = status, .reason = reason};
  answer.body = std::move(reason) + "\n";
  return answer;
}

}  // namespace

struct MetricsEndpoint::State {
  /// One accepted connection: reads one request head, writes one response, closes. It frees
  /// itself once both its handles are freed.
  struct Connection {
    State* owner;  ///< null once the endpoint closed
    UvHandle<uv_tcp_t> tcp;
    UvHandle<uv_timer_t> timer;
    int open = 0;  ///< handles not yet freed
    std::string head;
    std::string response;
    uv_write_t write{};
    char chunk[4096];

    explicit Connection(State* owner_) : owner(owner_) {}

    void close() noexcept {
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
  std::function<std::string()> exposition;
  MetricsEndpointOptions options;
  UvHandle<uv_tcp_t> listener;
  std::unordered_set<Connection*> connections;

  /// The answer to a whole request head.
  Answer answer(std::string_view head) const {
    const std::size_t line_end = head.find("\r\n");
    const std::string_view line = head.substr(0, line_end);
    const std::size_t first = line.find(' ');
    const std::size_t second = first == std::string_view::npos ? first : line.find(' ', first + 1);
    if (second == std::string_view::npos || !line.substr(second + 1).starts_with("HTTP/1.")) {
      return plain(400, "Bad Request");
    }
    const std::string_view method = line.substr(0, first);
    const std::string_view target = line.substr(first + 1, second - first - 1);
    if (target.substr(0, target.find('?')) != options.path) return plain(404, "Not Found");
    if (method != "GET" && method != "HEAD") return plain(405, "Method Not Allowed");
    return Answer{.reason = "OK",
                  .content_type = "text/plain; version=0.0.4; charset=utf-8",
                  .body = exposition(),
                  .head_only = method == "HEAD"};
  }

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
        uv_timer_start(connection->timer.get(), &on_timeout, head_timeout_ms, 0) != 0) {
      connection->close();
    }
  }

  static void on_alloc(uv_handle_t* handle, std::size_t, uv_buf_t* buffer) {
    auto* connection = static_cast<Connection*>(handle->data);
    *buffer = uv_buf_init(connection->chunk, sizeof connection->chunk);
  }

  static void on_read(uv_stream_t* stream, ssize_t read, const uv_buf_t* buffer) {
    auto* connection = static_cast<Connection*>(stream->data);
    if (read < 0 || connection->owner == nullptr) {
      connection->close();
      return;
    }
    connection->head.append(buffer->base, static_cast<std::size_t>(read));
    const std::size_t end = connection->head.find("\r\n\r\n");
    if (end == std::string::npos && connection->head.size() <= max_head_bytes) return;
    const Answer answer = end == std::string::npos || end + 4 > max_head_bytes
                              ? plain(431, "Request Header Fields Too Large")
                              : connection->owner->answer(connection->head);
    respond(*connection, answer);
  }

  static void respond(Connection& connection, const Answer& answer) {
    auto* stream = reinterpret_cast<uv_stream_t*>(connection.tcp.get());
    uv_read_stop(stream);
    uv_timer_stop(connection.timer.get());
    connection.response = response_text(answer);
    uv_buf_t buffer = uv_buf_init(connection.response.data(),
                                  static_cast<unsigned int>(connection.response.size()));
    connection.write.data = &connection;
    if (uv_write(&connection.write, stream, &buffer, 1, &on_written) != 0) connection.close();
  }

  static void on_written(uv_write_t* request, int) {
    // Why the connection is still here: it frees itself only once its handles are freed, and
    // libuv runs a write's callback (UV_ECANCELED on a close) before the handle's close callback.
    static_cast<Connection*>(request->data)->close();
  }

  static void on_timeout(uv_timer_t* timer) { static_cast<Connection*>(timer->data)->close(); }

  void close() noexcept {
    listener.close();
    const auto open = std::exchange(connections, {});
    for (Connection* connection : open) {
      connection->owner = nullptr;
      connection->close();
    }
  }
};

MetricsEndpoint::MetricsEndpoint(uv_loop_t* loop, std::function<std::string()> exposition,
                                 MetricsEndpointOptions options)
    : state_(std::make_unique<State>()) {
  if (options.port < 0 || options.port > 65535) {
    throw ConfigError("MetricsEndpoint: port " + std::to_string(options.port) +
                      " is outside 0-65535");
  }
  sockaddr_storage address{};
  if (uv_ip4_addr(options.host.c_str(), options.port, reinterpret_cast<sockaddr_in*>(&address)) !=
          0 &&
      uv_ip6_addr(options.host.c_str(), options.port, reinterpret_cast<sockaddr_in6*>(&address)) !=
          0) {
    throw ConfigError("MetricsEndpoint: host '" + options.host +
                      "' is not an IPv4 or IPv6 address");
  }
  State& state = *state_;
  state.loop = loop;
  state.exposition = std::move(exposition);
  state.options = std::move(options);
  state.listener.init(loop, uv_tcp_init);
  state.listener.get()->data = &state;
  const int bound = uv_tcp_bind(state.listener.get(), reinterpret_cast<sockaddr*>(&address), 0);
  const int listening = bound != 0 ? bound
                                   : uv_listen(reinterpret_cast<uv_stream_t*>(state.listener.get()),
                                               128, &State::on_connection);
  if (listening != 0) {
    state.listener.close();
    throw Error("MetricsEndpoint: cannot listen on " + state.options.host + " port " +
                std::to_string(state.options.port) + ": " + uv_strerror(listening));
  }
}

MetricsEndpoint::MetricsEndpoint(uv_loop_t* loop, std::shared_ptr<const Metrics> metrics,
                                 MetricsEndpointOptions options)
    : MetricsEndpoint(
          loop, [metrics = std::move(metrics)] { return metrics->prometheus_text(); },
          std::move(options)) {}

MetricsEndpoint::~MetricsEndpoint() {
  close();
}

int MetricsEndpoint::port() const noexcept {
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

void MetricsEndpoint::close() noexcept {
  state_->close();
}

}  // namespace redlimit
