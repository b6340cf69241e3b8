// http_gateway: an HTTP/1.1 server that rate limits every request with redlimit, per API key
// (X-API-Key) or else per client IP, and tells clients where they stand with the RateLimit-Policy
// and RateLimit fields of draft-ietf-httpapi-ratelimit-headers-10. GET /metrics answers what the
// limiter and its Redis client counted, for Prometheus. SIGINT or SIGTERM stops it.
//
// usage: http_gateway [--host ADDR] [--port N] [--redis URL | --local] [--rate RATE]
//                     [--daily N] [--global-rate RATE] [--on-failure closed|open|local]
//        (URL defaults to $REDLIMIT_URL, else redis://127.0.0.1:6379)
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>

#include "gateway.hpp"
#include "http_server.hpp"
#include "redlimit/redlimit.hpp"
#include "stop_signals.hpp"

namespace {

using namespace std::chrono_literals;
using redlimit::QuotaPolicy;

/// Listens with `server` on host:port and serves until `signals` reports SIGINT or SIGTERM,
/// then stops both and waits until their handles are closed. Returns the exit status: 0, or 1
/// if it could not listen.
redlimit::Task<int> serve(uv_loop_t* loop, http_gateway::HttpServer* server,
                          http_gateway::StopSignals* signals, std::string host, int port) {
  int status = 0;
  try {
    server->listen(host, port);
    std::printf("listening %s:%d\n", host.c_str(), server->port());
    std::fflush(stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "http_gateway: %s\n", e.what());
    status = 1;
  }
  if (status == 0) co_await signals->wait();
  server->stop();
  signals->close();
  while (!server->stopped() || !signals->closed())
    co_await redlimit::sleep_for(loop, 10ms);
  co_return status;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"HTTP gateway rate limited by redlimit, with the IETF RateLimit header fields"};
  const char* env_url = std::getenv("REDLIMIT_URL");
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string url = env_url != nullptr ? env_url : "redis://127.0.0.1:6379";
  bool local = false;
  std::string rate = "10/s";
  std::int64_t daily = 1000;
  // Fail closed by default: while Redis cannot answer, requests get 503 with Retry-After rather
  // than passing unlimited (--on-failure local limits each key in this process instead).
  redlimit::FailurePolicy::Kind on_failure = redlimit::FailurePolicy::fail_closed;
  const std::map<std::string, redlimit::FailurePolicy::Kind> failure_policies{
      {"closed", redlimit::FailurePolicy::fail_closed},
      {"open", redlimit::FailurePolicy::fail_open},
      {"local", redlimit::FailurePolicy::local_fallback}};
  app.add_option("--host", host, "address to listen on");
  app.add_option("--port", port, "port to listen on (0: any free port)")
      ->check(CLI::Range(0, 65535));
  auto* redis = app.add_option("--redis", url, "Redis URL (default: $REDLIMIT_URL)");
  std::string tls_ca;
  app.add_option("--tls-ca", tls_ca, "rediss://: the CA file of the server's certificate");
  app.add_flag("--local", local, "keep the limits in this process, without Redis")->excludes(redis);
  app.add_option("--rate", rate, "gcra rate per key, e.g. 10/s or 100/min (whole seconds)");
  app.add_option("--daily", daily, "fixed_window quota per key and UTC day")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1000000000}));
  std::string global_rate;
  app.add_option("--global-rate", global_rate,
                 "gcra rate of all keys together, e.g. 1000/s, in the same decision as each "
                 "key's limits (default: none)");
  app.add_option("--on-failure", on_failure, "what to answer when Redis cannot")
      ->transform(CLI::CheckedTransformer(failure_policies))
      ->option_text("closed|open|local (default: closed)");
  CLI11_PARSE(app, argc, argv);

  // The window first: the limiter's deny cache then applies (see docs/failures.md).
  redlimit::Policy policy;
  std::vector<QuotaPolicy> quotas;
  try {
    policy = redlimit::Policy{redlimit::Limit::fixed_window(redlimit::Rate{daily, 24h}),
                              redlimit::Limit::gcra(rate)};
    quotas.push_back(redlimit::quota_policy("daily", policy.limits[0]));
    quotas.push_back(redlimit::quota_policy("rate", policy.limits[1]));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "http_gateway: --rate: %s\n", e.what());
    return 2;
  }
  std::optional<redlimit::Policy> global_policy;
  std::optional<QuotaPolicy> global_quota;
  if (!global_rate.empty()) {
    try {
      global_policy = redlimit::Policy::of(redlimit::Limit::gcra(global_rate));
      global_quota = redlimit::quota_policy("global", global_policy->limits[0]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "http_gateway: --global-rate: %s\n", e.what());
      return 2;
    }
  }

  // Why: a client that resets its connection makes our next uv_write() raise SIGPIPE, which
  // kills the process by default; redlimit's guard covers only its own Redis sockets.
  std::signal(SIGPIPE, SIG_IGN);

  uv_loop_t loop;
  uv_loop_init(&loop);
  int status = 2;
  {
    // Why one Metrics given to both: an in-process limiter counts only into the one its options
    // name; a Redis one and its client count into their client's.
    const auto metrics = std::make_shared<redlimit::Metrics>();
    std::optional<redlimit::Client> client;
    std::optional<redlimit::Limiter> limiter;
    std::optional<redlimit::Limiter> global;
    try {
      const redlimit::LimiterOptions options{
          .name = "http_gateway", .on_failure = {.kind = on_failure}, .metrics = metrics};
      const redlimit::LimiterOptions global_options{
          .name = "http_gateway_global", .on_failure = {.kind = on_failure}, .metrics = metrics};
      if (local) {
        limiter.emplace(&loop, policy, options);
        if (global_policy) global.emplace(&loop, *global_policy, global_options);
      } else {
        redlimit::ClientOptions connection{.url = url, .metrics = metrics};
        connection.tls.ca_file = tls_ca;
        client.emplace(&loop, connection);
        limiter.emplace(*client, policy, options);
        if (global_policy) global.emplace(*client, *global_policy, global_options);
      }
      std::optional<http_gateway::Gateway> gateway;
      if (global) {
        gateway.emplace(*limiter, quotas, *global, *global_quota, *metrics);
      } else {
        gateway.emplace(*limiter, quotas, *metrics);
      }
      // Why not in serve()'s frame: they own uv handles, which must outlive their close
      // callbacks; serve() returns only once both are closed.
      http_gateway::HttpServer server(&loop, *gateway);
      http_gateway::StopSignals signals(&loop);
      status = redlimit::run(&loop, serve(&loop, &server, &signals, host, port));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "http_gateway: %s\n", e.what());
    }
    // Why here: the client owns uv timers from its construction on, whatever failed above.
    if (client) redlimit::run(&loop, client->close());
  }
  const int closed = uv_loop_close(&loop);
  if (closed != 0) std::fprintf(stderr, "http_gateway: uv_loop_close: %s\n", uv_strerror(closed));
  return closed == 0 ? status : 1;
}
