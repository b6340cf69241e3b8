#include "redlimit/metrics_endpoint.hpp"

namespace redlimit {

MetricsEndpoint::MetricsEndpoint(uv_loop_t* loop, std::function<std::string()> exposition,
                                 MetricsEndpointOptions options)
    : listener_(loop,
                [exposition = std::move(exposition), path = options.path](
                    HttpRequest request, std::function<void(HttpResponse)> respond) {
                  if (request.target.substr(0, request.target.find('?')) != path) {
                    respond({.status = 404, .body = "Not Found\n"});
                  } else if (request.method != "GET" && request.method != "HEAD") {
                    respond({.status = 405,
                             .headers = {{"Allow", "GET, HEAD"}},
                             .body = "Method Not Allowed\n"});
                  } else {
                    respond({.content_type = "text/plain; version=0.0.4; charset=utf-8",
                             .body = exposition()});
                  }
                },
                // Why a body is read at all: a POST with one gets its 405, not a 413.
                {.host = options.host, .port = options.port, .max_body_bytes = 64 * 1024}) {}

MetricsEndpoint::MetricsEndpoint(uv_loop_t* loop, std::shared_ptr<const Metrics> metrics,
                                 MetricsEndpointOptions options)
    : MetricsEndpoint(
          loop, [metrics = std::move(metrics)] { return metrics->prometheus_text(); },
          std::move(options)) {}

int MetricsEndpoint::port() const noexcept {
  return listener_.port();
}

void MetricsEndpoint::close() noexcept {
  listener_.close();
}

}  // namespace redlimit
