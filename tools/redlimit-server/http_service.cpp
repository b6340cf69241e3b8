#include "http_service.hpp"

#include <google/protobuf/util/json_util.h>
#include <netdb.h>

#include <memory>
#include <stdexcept>

#include "grpc_service.hpp"
#include "proto_translation.hpp"

namespace redlimit_server {

namespace {

/// `host` as an IP address: itself when it is one, else the first address of the name. Why
/// resolved here: an HttpListener takes an address, and --grpc-listen takes a name.
std::string address_of(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (const int error = getaddrinfo(host.c_str(), nullptr, &hints, &found); error != 0)
    throw std::invalid_argument("cannot resolve '" + host + "': " + gai_strerror(error));
  const std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> held(found, freeaddrinfo);
  char text[NI_MAXHOST];
  if (getnameinfo(found->ai_addr, found->ai_addrlen, text, sizeof text, nullptr, 0,
                  NI_NUMERICHOST) != 0) {
    throw std::invalid_argument("cannot tell the address of '" + host + "'");
  }
  return text;
}

}  // namespace

struct HttpService::Mailbox {
  std::mutex mutex;
  std::deque<std::function<void()>> letters;
  bool closed = false;
  uv_async_t async{};

  /// Runs `letter` on the loop (from any thread); dropped once closed.
  void send(std::function<void()> letter) {
    std::lock_guard lock(mutex);
    if (closed) return;
    letters.push_back(std::move(letter));
    uv_async_send(&async);
  }

  static void on_mail(uv_async_t* async) {
    auto* mailbox = static_cast<Mailbox*>(async->data);
    std::deque<std::function<void()>> letters;
    {
      std::lock_guard lock(mailbox->mutex);
      letters.swap(mailbox->letters);
    }
    for (auto& letter : letters)
      letter();
  }
};

HttpService::HttpService(uv_loop_t* loop, std::vector<std::unique_ptr<Worker>>& workers,
                         std::shared_ptr<const redlimit::Metrics> metrics,
                         std::shared_ptr<const ServerStats> stats)
    : loop_(loop),
      workers_(workers),
      metrics_(std::move(metrics)),
      stats_(std::move(stats)),
      mailbox_(std::make_shared<Mailbox>()) {
  mailbox_->async.data = mailbox_.get();
  uv_async_init(loop_, &mailbox_->async, &Mailbox::on_mail);
}

HttpService::~HttpService() {
  close();
}

int HttpService::listen(const std::string& host_port) {
  const auto [host, port] = split_host_port(host_port);
  listener_ = std::make_unique<redlimit::HttpListener>(
      loop_,
      [this](redlimit::HttpRequest request, std::function<void(redlimit::HttpResponse)> respond) {
        handle(std::move(request), std::move(respond));
      },
      redlimit::HttpListenerOptions{.host = address_of(host), .port = port});
  return listener_->port();
}

void HttpService::close() {
  if (closed_) return;
  closed_ = true;
  if (listener_) listener_->close();
  {
    std::lock_guard lock(mailbox_->mutex);
    mailbox_->closed = true;
  }
  // Why the mailbox goes with the close callback: a worker may still hold it, and libuv frees
  // the handle's use of it only then.
  auto* keep = new std::shared_ptr<Mailbox>(mailbox_);
  mailbox_->async.data = keep;
  uv_close(reinterpret_cast<uv_handle_t*>(&mailbox_->async), [](uv_handle_t* handle) {
    delete static_cast<std::shared_ptr<Mailbox>*>(handle->data);
  });
}

void HttpService::handle(redlimit::HttpRequest request,
                         std::function<void(redlimit::HttpResponse)> respond) {
  const std::string path = request.target.substr(0, request.target.find('?'));
  const bool reading = request.method == "GET" || request.method == "HEAD";
  if (path == "/healthcheck" && reading) {
    respond({.body = "OK\n"});
  } else if (path == "/metrics" && reading) {
    respond({.content_type = "text/plain; version=0.0.4; charset=utf-8",
             .body = metrics_->prometheus_text() + stats_->prometheus_text()});
  } else if (path == "/json" && request.method == "POST") {
    answer_json(request.body, std::move(respond));
  } else if (path == "/healthcheck" || path == "/metrics" || path == "/json") {
    respond({.status = 405, .body = "Method Not Allowed\n"});
  } else {
    respond({.status = 404, .body = "Not Found\n"});
  }
}

void HttpService::answer_json(const std::string& body,
                              std::function<void(redlimit::HttpResponse)> respond) {
  envoy::service::ratelimit::v3::RateLimitRequest request;
  RateLimitCall call;
  try {
    const auto parsed = google::protobuf::util::JsonStringToMessage(body, &request);
    if (!parsed.ok()) throw InvalidCall("not a RateLimitRequest in JSON: " + parsed.ToString());
    call = call_from(request);
  } catch (const InvalidCall& e) {
    respond({.status = 400, .body = std::string(e.what()) + "\n"});
    return;
  }
  Worker& worker = *workers_[next_worker_++ % workers_.size()];
  std::shared_ptr<Mailbox> mailbox = mailbox_;
  worker.submit(
      std::move(call), [mailbox, respond](std::exception_ptr error, RateLimitAnswer answer) {
        // On the worker's thread: the response is built here, and written on the loop.
        redlimit::HttpResponse response{.content_type = "application/json"};
        if (error) {
          const grpc::Status status = status_of(error);
          switch (status.error_code()) {
            case grpc::StatusCode::INVALID_ARGUMENT:
              response.status = 400;
              break;
            case grpc::StatusCode::UNAVAILABLE:
              response.status = 503;
              break;
            default:
              response.status = 500;
          }
          response.content_type = "text/plain; charset=utf-8";
          response.body = status.error_message() + "\n";
        } else {
          envoy::service::ratelimit::v3::RateLimitResponse message;
          fill(message, answer);
          google::protobuf::util::JsonPrintOptions options;
          options.always_print_primitive_fields = true;
          (void)google::protobuf::util::MessageToJsonString(message, &response.body, options);
          response.body += "\n";
          if (answer.overall_code == Code::over_limit) response.status = 429;
        }
        mailbox->send([respond, response = std::move(response)] { respond(response); });
      });
}

std::pair<std::string, int> split_host_port(const std::string& host_port) {
  const std::size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon + 1 == host_port.size())
    throw std::invalid_argument("'" + host_port + "' is not HOST:PORT");
  std::string host = host_port.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const std::string port = host_port.substr(colon + 1);
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port) > 65535) {
    throw std::invalid_argument("'" + port + "' is not a port");
  }
  return {host, std::stoi(port)};
}

}  // namespace redlimit_server
