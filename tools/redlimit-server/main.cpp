// redlimit-server: the rate limit service for Envoy (envoy.service.ratelimit.v3.RateLimitService
// over gRPC) and any HTTP client, on redlimit. It reads envoyproxy/ratelimit's YAML
// configuration, reloads it when it changes (keeping the last good one), and answers each call on
// one of its workers: a thread with its own libuv loop and redlimit Client.
//
// usage: redlimit-server --config PATH --redis URL --grpc-listen HOST:PORT --http-listen HOST:PORT
//        (redlimit-server --help)
#include <grpcpp/grpcpp.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <uv.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <csignal>
#include <thread>

#include "config_keeper.hpp"
#include "grpc_service.hpp"
#include "http_service.hpp"
#include "rate_limit_config.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/metrics.hpp"
#include "redlimit/redis_keys.hpp"
#include "redlimit/runtime.hpp"
#include "worker.hpp"

namespace {

using namespace std::chrono_literals;
using redlimit_server::Worker;

/// What the command line says.
struct ServerOptions {
  std::string config;
  bool merge_domain_config = false;
  std::string redis;
  std::string grpc_listen = "0.0.0.0:8081";
  std::string http_listen = "0.0.0.0:8080";
  unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  bool limit_response_headers = false;
  redlimit_server::LimitHeaders limit_headers;
  bool x_ratelimit_headers = false;
  bool no_ratelimit_headers = false;
  std::string prefix = "rl";
  std::uint64_t reload_ms = 1000;
  std::uint64_t command_timeout_ms = 250;
  bool no_central_policies = false;
};

/// What the main loop keeps: the workers, the configuration's keeper, and what a signal closes.
struct Running {
  ServerOptions options;
  std::vector<std::unique_ptr<Worker>> workers{};
  std::unique_ptr<redlimit_server::ConfigKeeper> keeper{};
  redlimit_server::HttpService* http = nullptr;
  uv_timer_t look{};
  uv_signal_t interrupt{};
  uv_signal_t terminate{};
};

/// SIGINT or SIGTERM: the main loop's handles close, and with them its run.
void on_signal(uv_signal_t* signal, int number) {
  auto& running = *static_cast<Running*>(signal->data);
  spdlog::info("redlimit-server: signal {}: stopping", number);
  for (auto* handle : {reinterpret_cast<uv_handle_t*>(&running.look),
                       reinterpret_cast<uv_handle_t*>(&running.interrupt),
                       reinterpret_cast<uv_handle_t*>(&running.terminate)}) {
    if (!uv_is_closing(handle)) uv_close(handle, nullptr);
  }
  running.http->close();
}

int serve(ServerOptions options) {
  if (!redlimit::is_valid_prefix(options.prefix)) {
    spdlog::error("redlimit-server: --prefix '{}': 1 to 64 characters from [A-Za-z0-9_.-]",
                  options.prefix);
    return 2;
  }
  // Why before the first read: a change made while the server starts is read at the first look.
  redlimit_server::ConfigWatch watch(options.config);
  std::shared_ptr<const redlimit_server::RateLimitConfig> config;
  try {
    config = std::make_shared<const redlimit_server::RateLimitConfig>(
        redlimit_server::load_and_warn(options.config, options.merge_domain_config));
  } catch (const std::exception& e) {
    spdlog::error("redlimit-server: {}", e.what());
    return 2;
  }
  Running running{.options = options};
  auto missing = std::make_shared<std::atomic<bool>>(false);
  auto metrics = std::make_shared<redlimit::Metrics>();
  auto stats = std::make_shared<redlimit_server::ServerStats>();
  redlimit_server::WorkerOptions worker_options;
  worker_options.client.url = options.redis;
  worker_options.client.metrics = metrics;
  worker_options.stats = stats;
  worker_options.client.command_timeout = std::chrono::milliseconds(options.command_timeout_ms);
  if (options.x_ratelimit_headers) {
    options.limit_headers = {.limit = "X-RateLimit-Limit",
                             .remaining = "X-RateLimit-Remaining",
                             .reset = "X-RateLimit-Reset"};
  }
  std::optional<redlimit_server::LimitHeaders> limit_headers;
  if (options.limit_response_headers || options.x_ratelimit_headers)
    limit_headers = options.limit_headers;
  worker_options.decider = {.ratelimit_headers = !options.no_ratelimit_headers,
                            .limit_headers = std::move(limit_headers),
                            .prefix = options.prefix,
                            .central_policies = !options.no_central_policies,
                            .on_policy_missing = [missing] { missing->store(true); }};
  try {
    for (unsigned i = 0; i < options.workers; ++i)
      running.workers.push_back(std::make_unique<Worker>(worker_options, config));
  } catch (const std::exception& e) {
    spdlog::error("redlimit-server: --redis: {}", e.what());
    return 2;
  }

  running.keeper = std::make_unique<redlimit_server::ConfigKeeper>(
      std::move(watch), options.config, options.merge_domain_config, running.workers,
      options.prefix, !options.no_central_policies, config, missing);
  // Why before serving: the limiters follow the central store, which must hold the limits.
  running.keeper->publish_first();

  grpc::ServerBuilder builder;
  int grpc_port = 0;
  builder.AddListeningPort(options.grpc_listen, grpc::InsecureServerCredentials(), &grpc_port);
  redlimit_server::RateLimitGrpcService service(builder, running.workers.size());
  std::unique_ptr<grpc::Server> grpc = builder.BuildAndStart();
  if (!grpc || grpc_port == 0) {
    spdlog::error("redlimit-server: --grpc-listen {}: cannot listen", options.grpc_listen);
    return 2;
  }
  service.serve(running.workers);

  uv_loop_t loop;
  uv_loop_init(&loop);
  int status = 0;
  {
    redlimit_server::HttpService http(&loop, running.workers, metrics, stats);
    running.http = &http;
    int http_port = 0;
    try {
      http_port = http.listen(options.http_listen);
    } catch (const std::exception& e) {
      spdlog::error("redlimit-server: --http-listen {}: {}", options.http_listen, e.what());
      status = 2;
      http.close();
    }
    if (status == 0) {
      uv_timer_init(&loop, &running.look);
      running.look.data = &running;
      uv_timer_start(
          &running.look,
          [](uv_timer_t* timer) { static_cast<Running*>(timer->data)->keeper->look(); },
          options.reload_ms, options.reload_ms);
      for (auto [handle, number] :
           {std::pair{&running.interrupt, SIGINT}, std::pair{&running.terminate, SIGTERM}}) {
        uv_signal_init(&loop, handle);
        handle->data = &running;
        uv_signal_start(handle, &on_signal, number);
      }
      // The line tests and scripts wait for: the ports taken (the system's choice for port 0).
      std::printf("redlimit-server: serving grpc=%d http=%d\n", grpc_port, http_port);
      std::fflush(stdout);
      spdlog::info("redlimit-server: {} domain(s), {} worker(s), gRPC on port {}, HTTP on port {}",
                   config->domains.size(), options.workers, grpc_port, http_port);
    }
    // Until a signal closes the main loop's handles (HTTP and the reload timer run meanwhile).
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  // Why this order: gRPC's calls in flight end on the workers, which then close their Clients.
  grpc->Shutdown(std::chrono::system_clock::now() + 5s);
  for (const auto& worker : running.workers)
    worker->stop();
  running.workers.clear();
  uv_loop_close(&loop);
  return status;
}

/// HOST:PORT with a port from 0 to 65535 (or a gRPC `unix:` address). Why checked here: gRPC
/// takes a larger port modulo 65536 and listens on another one.
const CLI::Validator host_and_port(
    [](const std::string& value) -> std::string {
      if (value.starts_with("unix:")) return {};
      const std::size_t colon = value.rfind(':');
      int port = -1;
      if (colon != std::string::npos && colon > 0) {
        const char* first = value.data() + colon + 1;
        const char* last = value.data() + value.size();
        const auto [end, error] = std::from_chars(first, last, port);
        if (error != std::errc() || end != last || first == last) port = -1;
      }
      if (port < 0 || port > 65535)
        return "expected HOST:PORT with a port from 0 to 65535, got '" + value + "'";
      return {};
    },
    "HOST:PORT");

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  // Why stderr: stdout carries only the line that says where the server listens.
  spdlog::set_default_logger(spdlog::stderr_color_st("redlimit-server"));
  ServerOptions options;
  CLI::App app{
      "redlimit-server: the rate limit service for Envoy (envoy.service.ratelimit.v3) and any "
      "gRPC or HTTP client, enforcing envoyproxy/ratelimit's YAML configuration in Redis"};
  app.add_option(
         "--config", options.config,
         "a YAML file, or a directory of them (one domain each; every file below it, but names "
         "starting with '.'); reloaded when changed")
      ->required();
  app.add_flag("--merge-domain-config", options.merge_domain_config,
               "a domain may be defined in several files, whose descriptors join it (as "
               "envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG)");
  app.add_option("--redis", options.redis,
                 "the Redis URL: redis://, rediss://, redis-sentinel://, redis-cluster://")
      ->required();
  app.add_option("--grpc-listen", options.grpc_listen, "HOST:PORT for gRPC (port 0: any free)")
      ->check(host_and_port)
      ->capture_default_str();
  app.add_option("--http-listen", options.http_listen,
                 "HOST:PORT for /healthcheck, /metrics and /json (port 0: any free)")
      ->check(host_and_port)
      ->capture_default_str();
  app.add_option("--workers", options.workers, "worker threads, each with its own Redis client")
      ->check(CLI::Range(1u, 256u))
      ->capture_default_str();
  CLI::Option* limit_response_headers = app.add_flag(
      "--limit-response-headers", options.limit_response_headers,
      "also answer envoyproxy/ratelimit's headers (its LIMIT_RESPONSE_HEADERS_ENABLED): the "
      "limit, what is left and the seconds to the reset, of the last descriptor over its limit, "
      "else of the one with the fewest left");
  app.add_option("--limit-limit-header", options.limit_headers.limit,
                 "the name of the first (its LIMIT_LIMIT_HEADER)")
      ->needs(limit_response_headers)
      ->capture_default_str();
  app.add_option("--limit-remaining-header", options.limit_headers.remaining,
                 "the name of the second (its LIMIT_REMAINING_HEADER)")
      ->needs(limit_response_headers)
      ->capture_default_str();
  app.add_option("--limit-reset-header", options.limit_headers.reset,
                 "the name of the third (its LIMIT_RESET_HEADER)")
      ->needs(limit_response_headers)
      ->capture_default_str();
  app.add_flag("--x-ratelimit-headers", options.x_ratelimit_headers,
               "the same headers, named X-RateLimit-Limit, -Remaining and -Reset")
      ->excludes(limit_response_headers);
  app.add_flag("--no-ratelimit-headers", options.no_ratelimit_headers,
               "answer without the IETF RateLimit-Policy and RateLimit fields");
  app.add_option("--prefix", options.prefix, "the first part of every Redis key")
      ->capture_default_str();
  app.add_option("--reload-interval-ms", options.reload_ms,
                 "how often the configuration's files are looked at")
      ->check(CLI::Range(std::uint64_t{10}, std::uint64_t{3'600'000}))
      ->capture_default_str();
  app.add_flag("--no-central-policies", options.no_central_policies,
               "each replica enforces its own configuration, not the limits written last to "
               "the central store");
  app.add_option("--command-timeout-ms", options.command_timeout_ms,
                 "each Redis command's deadline; past it the call fails (UNAVAILABLE), or the "
                 "domain's on_failure answers")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{60'000}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return serve(std::move(options));
}
