#pragma once
/// @file http_service.hpp
/// HttpService: what redlimit-server answers over HTTP beside gRPC: GET /healthcheck, GET
/// /metrics (the library's metrics and the server's calls per domain), and POST /json,
/// ShouldRateLimit in the protobuf JSON mapping (as envoyproxy/ratelimit's /json): 200, 429
/// over the limit, 400 for a call it cannot read, 503 when Redis could not answer and no
/// failure policy did, 500 otherwise.

#include <uv.h>

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "redlimit/http_listener.hpp"
#include "redlimit/metrics.hpp"
#include "worker.hpp"

namespace redlimit_server {

/// Serves HTTP on the main loop; a /json call is decided by a worker and answered back on the
/// loop. Use on the loop's thread.
class HttpService {
 public:
  /// The workers must outlive the calls handed to them (stop them after close()).
  HttpService(uv_loop_t* loop, std::vector<std::unique_ptr<Worker>>& workers,
              std::shared_ptr<const redlimit::Metrics> metrics,
              std::shared_ptr<const ServerStats> stats);
  ~HttpService();
  HttpService(const HttpService&) = delete;
  HttpService& operator=(const HttpService&) = delete;

  /// Listens on `host_port` ("HOST:PORT", "[IPv6]:PORT"; a host name: its first address; port
  /// 0: any free); returns the port. Throws std::invalid_argument for a malformed address or a
  /// name that does not resolve, redlimit::Error when it cannot listen.
  int listen(const std::string& host_port);
  /// Stops listening and closes every connection: a /json call in flight is dropped, and so is
  /// its answer when the worker sends it. Its handles are freed by the loop's next iteration.
  /// Idempotent.
  void close();

 private:
  /// What worker threads hand back to the loop.
  struct Mailbox;

  void handle(redlimit::HttpRequest request, std::function<void(redlimit::HttpResponse)> respond);
  void answer_json(const std::string& body, std::function<void(redlimit::HttpResponse)> respond);

  uv_loop_t* loop_;
  std::vector<std::unique_ptr<Worker>>& workers_;
  std::shared_ptr<const redlimit::Metrics> metrics_;
  std::shared_ptr<const ServerStats> stats_;
  std::shared_ptr<Mailbox> mailbox_;
  std::unique_ptr<redlimit::HttpListener> listener_;
  std::size_t next_worker_ = 0;
  bool closed_ = false;
};

/// `host_port` as a host and a port; throws std::invalid_argument.
std::pair<std::string, int> split_host_port(const std::string& host_port);

}  // namespace redlimit_server
