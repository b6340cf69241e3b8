#include "provider_process.hpp"

#include <csignal>
#include <cstdio>
#include <sstream>

namespace {

/// Closes the provider on the first SIGTERM or SIGINT; the loop then ends by itself.
struct StopSignals {
  uv_signal_t terminate;
  uv_signal_t interrupt;
  Provider* provider;

  StopSignals(uv_loop_t* loop, Provider* provider) : provider(provider) {
    for (uv_signal_t* handle : {&terminate, &interrupt}) {
      uv_signal_init(loop, handle);
      handle->data = this;
    }
    uv_signal_start(&terminate, &StopSignals::on_signal, SIGTERM);
    uv_signal_start(&interrupt, &StopSignals::on_signal, SIGINT);
  }
  static void on_signal(uv_signal_t* handle, int) {
    auto* self = static_cast<StopSignals*>(handle->data);
    if (uv_is_closing(reinterpret_cast<uv_handle_t*>(&self->terminate))) return;
    self->provider->close();
    uv_close(reinterpret_cast<uv_handle_t*>(&self->terminate), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&self->interrupt), nullptr);
  }
};

}  // namespace

int run_provider_process(int rate) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  ProviderReport report;
  bool listening = true;
  {
    Provider provider(&loop, rate);
    StopSignals signals(&loop, &provider);
    try {
      std::printf("listening %d\n", provider.listen(0));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      listening = false;
      StopSignals::on_signal(&signals.terminate, SIGTERM);
    }
    std::fflush(stdout);
    // Why the signals live in this block: the loop returns only after their close callbacks.
    uv_run(&loop, UV_RUN_DEFAULT);
    report = provider.report();
  }
  std::printf("report %lld %lld %zu %zu %zu\n", static_cast<long long>(report.accepted),
              static_cast<long long>(report.rejected), report.peak_arrivals, report.peak_accepted,
              report.peak_sent);
  std::fflush(stdout);
  return uv_loop_close(&loop) == 0 && listening ? 0 : 1;
}

bool parse_provider_report(const std::string& line, ProviderReport& report) {
  std::istringstream fields(line);
  std::string what;
  fields >> what;
  if (what != "report") return false;
  fields >> report.accepted >> report.rejected >> report.peak_arrivals >> report.peak_accepted >>
      report.peak_sent;
  return static_cast<bool>(fields);
}
