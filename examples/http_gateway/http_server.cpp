#include "http_server.hpp"

#include <cstdio>
#include <stdexcept>
#include <vector>

#include "http_connection.hpp"

namespace http_gateway {
namespace {

void check(int status, const char* step) {
  if (status != 0) throw std::runtime_error(std::string(step) + ": " + uv_strerror(status));
}

}  // namespace

HttpServer::HttpServer(uv_loop_t* loop, RequestHandler& handler) : loop_(loop), handler_(handler) {
  check(uv_tcp_init(loop_, &listener_), "uv_tcp_init");
  listener_.data = this;
}

void HttpServer::listen(const std::string& host, int port) {
  sockaddr_storage address{};
  if (uv_ip4_addr(host.c_str(), port, reinterpret_cast<sockaddr_in*>(&address)) != 0 &&
      uv_ip6_addr(host.c_str(), port, reinterpret_cast<sockaddr_in6*>(&address)) != 0) {
    throw std::runtime_error("not an IPv4 or IPv6 address: " + host);
  }
  check(uv_tcp_bind(&listener_, reinterpret_cast<const sockaddr*>(&address), 0),
        ("bind " + host + " port " + std::to_string(port)).c_str());
  check(uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), 128, &on_connection), "listen");

  sockaddr_storage bound{};
  int length = sizeof bound;
  check(uv_tcp_getsockname(&listener_, reinterpret_cast<sockaddr*>(&bound), &length),
        "getsockname");
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

void HttpServer::stop() {
  if (stopping_) return;
  stopping_ = true;
  uv_close(reinterpret_cast<uv_handle_t*>(&listener_), [](uv_handle_t* handle) {
    static_cast<HttpServer*>(handle->data)->listener_closed_ = true;
  });
  // Why a copy: a connection leaves the set when it is destroyed, which must not happen while
  // the set is being iterated.
  const std::vector<Connection*> open(connections_.begin(), connections_.end());
  for (Connection* connection : open)
    connection->shut_down();
}

void HttpServer::on_connection(uv_stream_t* listener, int status) {
  auto* server = static_cast<HttpServer*>(listener->data);
  if (status < 0) {
    std::fprintf(stderr, "http_gateway: accept failed: %s\n", uv_strerror(status));
    return;
  }
  Connection::accept(listener, *server);
}

}  // namespace http_gateway
