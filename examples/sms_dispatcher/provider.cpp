#include "provider.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace {

using Clock = TrailingWindow::Clock;

/// Writes a string literal (static storage: nothing to keep alive but the request).
void write_literal(uv_stream_t* stream, const char* text, std::size_t size) {
  auto* request = new uv_write_t;
  uv_buf_t buffer = uv_buf_init(const_cast<char*>(text), static_cast<unsigned>(size));
  if (uv_write(request, stream, &buffer, 1, [](uv_write_t* done, int) { delete done; }) != 0)
    delete request;
}

}  // namespace

/// One client connection; deleted in its handle's close callback.
struct Provider::Connection {
  uv_tcp_t handle;
  Provider* provider = nullptr;
  std::string pending;  ///< the part of a line read so far
  Connection* previous = nullptr;
  Connection* next = nullptr;

  void close() {
    if (previous != nullptr) previous->next = next;
    if (next != nullptr) next->previous = previous;
    if (provider->connections_ == this) provider->connections_ = next;
    uv_close(reinterpret_cast<uv_handle_t*>(&handle),
             [](uv_handle_t* h) { delete static_cast<Connection*>(h->data); });
  }
};

Provider::Provider(uv_loop_t* loop, int limit_per_second)
    : loop_(loop),
      limit_(static_cast<std::size_t>(limit_per_second)),
      server_(new uv_tcp_t),
      accepted_window_(std::chrono::seconds(1)),
      arrivals_window_(std::chrono::seconds(1)) {
  uv_tcp_init(loop_, server_);
  server_->data = this;
}

Provider::~Provider() {
  close();
}

int Provider::listen(int port) {
  sockaddr_in address{};
  uv_ip4_addr("127.0.0.1", port, &address);
  int error = uv_tcp_bind(server_, reinterpret_cast<const sockaddr*>(&address), 0);
  if (error == 0)
    error = uv_listen(reinterpret_cast<uv_stream_t*>(server_), 128, &Provider::on_connection);
  if (error != 0) throw std::runtime_error(std::string("provider: listen: ") + uv_strerror(error));
  sockaddr_storage bound{};
  int length = sizeof bound;
  uv_tcp_getsockname(server_, reinterpret_cast<sockaddr*>(&bound), &length);
  return ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

void Provider::close() {
  if (closed_) return;
  closed_ = true;
  while (connections_ != nullptr)
    connections_->close();
  uv_close(reinterpret_cast<uv_handle_t*>(server_),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_tcp_t*>(h); });
}

ProviderReport Provider::report() const {
  std::vector<std::int64_t> sent = sent_us_;
  std::sort(sent.begin(), sent.end());
  std::size_t peak_sent = 0;
  for (std::size_t first = 0, last = 0; last < sent.size(); ++last) {
    while (sent[first] <= sent[last] - 1'000'000)
      ++first;
    peak_sent = std::max(peak_sent, last - first + 1);
  }
  return {accepted_, rejected_, arrivals_window_.peak(), accepted_window_.peak(), peak_sent};
}

void Provider::on_connection(uv_stream_t* server, int status) {
  auto* self = static_cast<Provider*>(server->data);
  if (status != 0 || self->closed_) return;
  auto* connection = new Connection;
  connection->provider = self;
  uv_tcp_init(self->loop_, &connection->handle);
  connection->handle.data = connection;
  uv_tcp_nodelay(&connection->handle, 1);
  connection->next = self->connections_;
  if (self->connections_ != nullptr) self->connections_->previous = connection;
  self->connections_ = connection;
  auto* stream = reinterpret_cast<uv_stream_t*>(&connection->handle);
  if (uv_accept(server, stream) != 0) return connection->close();
  uv_read_start(
      stream,
      [](uv_handle_t*, std::size_t suggested, uv_buf_t* buffer) {
        *buffer = uv_buf_init(new char[suggested], static_cast<unsigned>(suggested));
      },
      [](uv_stream_t* client, ssize_t size, const uv_buf_t* buffer) {
        auto* connection = static_cast<Connection*>(client->data);
        if (size < 0) {
          connection->close();  // the node is done (EOF) or gone
        } else {
          connection->pending.append(buffer->base, static_cast<std::size_t>(size));
          std::size_t end;
          while ((end = connection->pending.find('\n')) != std::string::npos) {
            const std::string line = connection->pending.substr(0, end);
            connection->pending.erase(0, end + 1);
            connection->provider->on_line(*connection, line);
          }
        }
        delete[] buffer->base;
      });
}

void Provider::on_line(Connection& connection, const std::string& line) {
  if (line.rfind("SEND ", 0) != 0) return;
  std::istringstream fields(line.substr(5));
  std::int64_t node = 0;
  std::int64_t seq = 0;
  std::int64_t sent_us = 0;
  if (fields >> node >> seq >> sent_us) sent_us_.push_back(sent_us);
  const auto now = Clock::now();
  arrivals_window_.add(now);
  auto* stream = reinterpret_cast<uv_stream_t*>(&connection.handle);
  if (accepted_window_.count(now) < limit_) {
    accepted_window_.add(now);
    ++accepted_;
    write_literal(stream, "OK\n", 3);
  } else {
    ++rejected_;
    write_literal(stream, "REJECT\n", 7);
  }
}
