// sms_dispatcher: the demo. A provider accepts at most --rate messages per second across all
// callers and drops the excess; --nodes dispatcher processes, each able to send far faster,
// share that limit through redlimit on Redis (`co_await limiter.acquire("provider")` before
// every message). The launcher shows their progress and reports what the provider saw.
//
// usage: sms_dispatcher [--nodes N] [--messages M] [--rate R] [--algorithm A] [--margin F]
//                       [--no-limit] [--replicas N] [--local] [--redis URL]
// (`sms_dispatcher node ...` and `sms_dispatcher provider ...` are how the launcher starts the
// other processes.)
#include <sys/prctl.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <utility>

#include "launcher.hpp"
#include "node_process.hpp"
#include "provider_process.hpp"

namespace {

void add_limit_options(CLI::App& app, DispatchSettings& settings) {
  app.add_option("--rate", settings.rate, "the provider's limit, messages per second")
      ->check(CLI::Range(1, 100'000));
  app.add_option("--algorithm", settings.algorithm, "the limiter's algorithm")
      ->check(CLI::IsMember(algorithm_names()));
  app.add_option("--margin", settings.margin,
                 "run the limiter this fraction below --rate, for the jitter between admission "
                 "and arrival at the provider")
      ->check(CLI::Range(0.0, 0.5));
  app.add_flag("--no-limit", settings.no_limit, "send without redlimit, to see the losses");
  app.add_option("--replicas", settings.replicas,
                 "answer an admission once this many replicas hold it (ClientOptions::replicas), "
                 "so that a failover loses none")
      ->check(CLI::Range(0, 16));
}

/// SIGINT and SIGTERM call `on_stop` (once), so that the children are stopped too.
class StopSignals {
 public:
  StopSignals(uv_loop_t* loop, std::function<void()> on_stop) : on_stop_(std::move(on_stop)) {
    for (uv_signal_t* handle : {&interrupt_, &terminate_}) {
      uv_signal_init(loop, handle);
      handle->data = this;
    }
    uv_signal_start(&interrupt_, &StopSignals::on_signal, SIGINT);
    uv_signal_start(&terminate_, &StopSignals::on_signal, SIGTERM);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  /// Closes the handles; the loop must run once more before they are gone.
  void close() {
    for (uv_signal_t* handle : {&interrupt_, &terminate_})
      uv_close(reinterpret_cast<uv_handle_t*>(handle), nullptr);
  }

 private:
  static void on_signal(uv_signal_t* handle, int) {
    auto* self = static_cast<StopSignals*>(handle->data);
    if (auto stop = std::exchange(self->on_stop_, nullptr)) stop();
  }
  uv_signal_t interrupt_;
  uv_signal_t terminate_;
  std::function<void()> on_stop_;
};

void print_report(const DispatchSettings& settings, const DispatchReport& report) {
  const double ideal = static_cast<double>(settings.messages) / settings.rate;
  const std::string how = settings.no_limit ? "no limiter"
                          : settings.local
                              ? settings.algorithm + " in this process (LocalBackend)"
                              : settings.algorithm + " on Redis at " + report.redis_url;
  std::printf("\nsent         %lld messages from %d nodes (%s, %lld/s)\n",
              static_cast<long long>(report.sent), settings.nodes, how.c_str(),
              static_cast<long long>(settings.no_limit ? 0 : limiter_rate(settings)));
  std::printf(
      "retried      %lld permits denied by the failure policy (Redis unavailable, or "
      "its answer too late to use)\n",
      static_cast<long long>(report.retried));
  std::printf("accepted     %lld by the provider\n",
              static_cast<long long>(report.provider.accepted));
  std::printf("rejected     %lld (lost)\n", static_cast<long long>(report.provider.rejected));
  std::printf("busiest 1 s  %zu accepted (the provider's limit: %d), %zu arrived\n",
              report.provider.peak_accepted, settings.rate, report.provider.peak_arrivals);
  std::printf("time         %.2f s; ideal %.2f s (%lld messages at the provider's %d/s)\n",
              report.seconds, ideal, static_cast<long long>(settings.messages), settings.rate);
}

int launch(const DispatchSettings& settings) {
  char self[4096];
  std::size_t size = sizeof self;
  if (uv_exepath(self, &size) != 0) {
    std::fprintf(stderr, "sms_dispatcher: cannot find its own path\n");
    return 2;
  }
  uv_loop_t loop;
  uv_loop_init(&loop);
  int status = 0;
  {
    Launcher launcher(&loop, settings, self);
    StopSignals signals(&loop, [&launcher] { launcher.interrupt(); });
    try {
      const DispatchReport report = redlimit::run(&loop, launcher.run());
      print_report(settings, report);
      if (report.interrupted) {
        std::printf("\nINTERRUPTED: the nodes were stopped; 'sent' is what they last reported\n");
        status = 1;
      }
      const std::int64_t lost = settings.messages - report.provider.accepted;
      if (lost > 0) {
        std::printf("\nLOST %lld messages%s\n", static_cast<long long>(lost),
                    report.interrupted        ? ": not sent before the interruption"
                    : report.failed_nodes > 0 ? ": nodes failed (see above)"
                    : settings.no_limit       ? ": the nodes outran the provider"
                    : settings.algorithm == "gcra" || settings.algorithm == "leaky_bucket" ||
                            settings.algorithm == "token_bucket"
                        ? ": arrivals jittered by more than the margin; try a larger --margin"
                        : ": a window algorithm admits its permits in bursts, and the provider "
                          "counts arrivals, not Redis time; gcra or leaky_bucket space them out");
        status = 1;
      }
      if (report.failed_nodes > 0) {
        std::fprintf(stderr, "sms_dispatcher: %d node(s) failed\n", report.failed_nodes);
        status = 1;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sms_dispatcher: %s\n", e.what());
      status = 2;
    }
    signals.close();
  }
  uv_run(&loop, UV_RUN_DEFAULT);  // the handles closed on the way out
  if (uv_loop_close(&loop) != 0) {
    std::fprintf(stderr, "sms_dispatcher: a uv handle was left open\n");
    status = 2;
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"SMS dispatcher demo: nodes share a provider's rate limit through redlimit"};
  DispatchSettings settings;
  if (const char* url = std::getenv("REDLIMIT_URL")) settings.redis_url = url;
  app.add_option("--nodes", settings.nodes, "dispatcher processes")->check(CLI::Range(1, 64));
  app.add_option("--messages", settings.messages, "messages in all, shared out among the nodes")
      ->check(CLI::Range(1, 10'000'000));
  add_limit_options(app, settings);
  app.add_flag("--local", settings.local, "one process: nodes as coroutines, LocalBackend");
  app.add_option("--redis", settings.redis_url,
                 "use this Redis (default: $REDLIMIT_URL, else a private redis-server)");
  app.add_option("--tls-ca", settings.tls_ca,
                 "rediss://: the CA file of the server's certificate (default: the system's)");

  NodeSettings node;
  CLI::App* node_command = app.add_subcommand("node", "one node (started by the launcher)");
  node_command->group("");
  node_command->add_option("--id", node.id)->required();
  node_command->add_option("--messages", node.messages)->required();
  node_command->add_option("--provider-port", node.provider_port)->required();
  node_command->add_option("--redis", settings.redis_url);
  node_command->add_option("--tls-ca", settings.tls_ca);
  add_limit_options(*node_command, settings);
  int provider_rate = 400;
  CLI::App* provider_command =
      app.add_subcommand("provider", "the mock provider (started by the launcher)");
  provider_command->group("");
  provider_command->add_option("--rate", provider_rate)->check(CLI::Range(1, 100'000));
  CLI11_PARSE(app, argc, argv);

  std::signal(SIGPIPE, SIG_IGN);
  // Why: a launcher killed outright (SIGKILL) must not leave its node and provider processes.
  if (*node_command || *provider_command) prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (*node_command) return run_node_process(settings, node);
  if (*provider_command) return run_provider_process(provider_rate);
  return launch(settings);
}
