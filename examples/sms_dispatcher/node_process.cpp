#include "node_process.hpp"

#include <cstdio>
#include <optional>
#include <stop_token>

namespace {

void print_progress(const char* what, const NodeProgress& p) {
  std::printf("%s %lld %lld %lld %lld", what, static_cast<long long>(p.sent),
              static_cast<long long>(p.accepted), static_cast<long long>(p.rejected),
              static_cast<long long>(p.errors));
}

redlimit::Task<void> report_progress(uv_loop_t* loop, const Node& node, std::stop_token stop) {
  for (;;) {
    print_progress("progress", node.progress());
    std::printf("\n");
    std::fflush(stdout);
    try {
      co_await redlimit::sleep_for(loop, std::chrono::milliseconds(200), stop);
    } catch (const redlimit::Cancelled&) {
      co_return;
    }
  }
}

redlimit::Task<void> node_main(uv_loop_t* loop, redlimit::Client* client, Node& node) {
  std::stop_source stop_reporting;
  redlimit::TaskGroup reporter;
  reporter.add(report_progress(loop, node, stop_reporting.get_token()));
  std::exception_ptr failure;
  try {
    if (client != nullptr) co_await client->connect();
    co_await node.run();
  } catch (...) {
    failure = std::current_exception();
  }
  stop_reporting.request_stop();
  co_await reporter.join();
  if (client != nullptr) co_await client->close();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

int run_node_process(const DispatchSettings& settings, const NodeSettings& node_settings) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  int status = 0;
  {
    std::optional<redlimit::Client> client;
    std::optional<redlimit::Limiter> limiter;
    if (!settings.no_limit) {
      redlimit::ClientOptions connection{.url = settings.redis_url, .replicas = settings.replicas};
      connection.tls.ca_file = settings.tls_ca;
      client.emplace(&loop, connection);
      limiter.emplace(*client, dispatch_policy(settings), redlimit::LimiterOptions{.name = "sms"});
    }
    // Why here: the node outlives run(), which returns from inside one of its link's callbacks.
    NodeSettings paced = node_settings;
    paced.max_lateness = max_lateness(settings);
    Node node(&loop, limiter ? &*limiter : nullptr, paced);
    try {
      redlimit::run(&loop, node_main(&loop, client ? &*client : nullptr, node));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "node %d: %s\n", node_settings.id, e.what());
      status = 1;
    }
    print_progress("done", node.progress());
    std::printf(" %d\n", node.progress().provider_lost ? 1 : 0);
    std::fflush(stdout);
    if (node.progress().provider_lost) status = 1;
  }
  uv_run(&loop, UV_RUN_DEFAULT);  // the handles closed on the way out
  if (uv_loop_close(&loop) != 0) {
    std::fprintf(stderr, "node %d: a uv handle was left open\n", node_settings.id);
    status = 1;
  }
  return status;
}
