#pragma once
/// @file metrics_endpoint.hpp
/// MetricsEndpoint: a small HTTP server on the loop that answers a Prometheus scrape.

#include <uv.h>

#include <functional>
#include <memory>
#include <string>

#include "redlimit/http_listener.hpp"
#include "redlimit/metrics.hpp"

namespace redlimit {

/// Where a MetricsEndpoint listens.
struct MetricsEndpointOptions {
  std::string host = "127.0.0.1";  ///< an IPv4 or IPv6 address (not a name)
  int port = 0;                    ///< 0: a free port, see MetricsEndpoint::port()
  std::string path = "/metrics";   ///< what the scrape asks for (a query string is ignored)
};

/// Answers `GET <path>` (and HEAD) with the Prometheus text exposition, on the loop's thread:
/// 200 with `Content-Type: text/plain; version=0.0.4; charset=utf-8`; 404 for another path,
/// 405 for another method; and as an HttpListener, 400 for a request it cannot read, 431 for a
/// request head over 8 KiB, one request per connection (`Connection: close`).
///
/// Not movable; use it on its loop's thread. Destroying it closes it.
class MetricsEndpoint {
 public:
  /// Listens at once, answering each scrape with `exposition()`. Throws ConfigError for a host
  /// that is not an IP address or a port outside 0-65535, and Error when it cannot listen (the
  /// port is taken).
  MetricsEndpoint(uv_loop_t* loop, std::function<std::string()> exposition,
                  MetricsEndpointOptions options = {});
  /// The same, answering with `metrics->prometheus_text()` (Client::metrics(), for example).
  MetricsEndpoint(uv_loop_t* loop, std::shared_ptr<const Metrics> metrics,
                  MetricsEndpointOptions options = {});

  /// The port it listens on (the one the system chose for port 0).
  int port() const noexcept;
  /// Stops listening and closes every open connection; their handles are freed by the loop's
  /// next iteration. Idempotent.
  void close() noexcept;

 private:
  HttpListener listener_;
};

}  // namespace redlimit
