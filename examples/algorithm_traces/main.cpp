// algorithm_traces: one bursty load offered to each of redlimit's six algorithms on Redis, every
// decision recorded with Redis's time, one data file per trace for gnuplot (traces.gp; the
// pictures in docs/algorithms.md come from scripts/plots). Exits 1 if a request failed or a
// trace breaks its algorithm's guarantee (check.hpp).
//
// usage: algorithm_traces --out DIR [--redis URL] [--seconds S]
//        (URL defaults to $REDLIMIT_URL; scripts/with-redis starts a private server)
#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "check.hpp"
#include "load.hpp"
#include "offer.hpp"
#include "redlimit/redlimit.hpp"
#include "trace.hpp"

namespace {

using namespace algorithm_traces;

/// Prints a table of the traces' numbers.
void print_summary(const std::vector<Trace>& traces) {
  std::printf("%-24s %8s %9s %16s %11s %13s\n", "trace", "offered", "admitted", "most in 1 period",
              "min gap ms", "max delay ms");
  for (const Trace& trace : traces) {
    const Summary summary = summarize(trace);
    std::printf("%-24s %8zu %9zu %16lld %11.3f %13.3f\n", trace.name.c_str(), summary.offered,
                summary.admitted, static_cast<long long>(summary.most_in_period),
                static_cast<double>(summary.min_gap_us) / 1e3,
                static_cast<double>(summary.max_delay_us) / 1e3);
  }
}

/// Prints every fault of every trace to stderr; returns how many there were.
std::size_t report_faults(const std::vector<Trace>& traces) {
  std::size_t count = 0;
  for (const Trace& trace : traces) {
    for (const std::string& fault : check(trace)) {
      std::fprintf(stderr, "algorithm_traces: %s: %s\n", trace.name.c_str(), fault.c_str());
      ++count;
    }
  }
  return count;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"One bursty load through redlimit's six algorithms on Redis, recorded for gnuplot"};
  const char* env_url = std::getenv("REDLIMIT_URL");
  std::string url = env_url != nullptr ? env_url : "redis://127.0.0.1:6379";
  std::filesystem::path out;
  int seconds = 5;
  app.add_option("--redis", url, "Redis URL (default: $REDLIMIT_URL)");
  app.add_option("--out", out, "directory for the data files (created if missing)")->required();
  app.add_option("--seconds", seconds, "length of the load; it repeats a 5 s cycle")
      ->check(CLI::Range(1, 600));
  CLI11_PARSE(app, argc, argv);

  std::vector<Trace> traces = all_traces();
  uv_loop_t loop;
  uv_loop_init(&loop);
  Run run;
  bool failed = false;
  try {
    redlimit::Client client(&loop, {.url = url,
                                    .command_timeout = std::chrono::seconds(1),
                                    .reservation_lease = std::chrono::seconds(3)});
    run = redlimit::run(&loop,
                        offer(&loop, client, traces, offered_load(std::chrono::seconds(seconds))));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "algorithm_traces: %s\n", e.what());
    failed = true;
  }
  const int closed = uv_loop_close(&loop);
  if (closed != 0)
    std::fprintf(stderr, "algorithm_traces: uv_loop_close: %s\n", uv_strerror(closed));
  if (failed || closed != 0) return 1;

  try {
    std::filesystem::create_directories(out);
    for (const Trace& trace : traces)
      write_trace(trace, run.start_us, run.end_us, out);
    write_params(traces, run.start_us, run.end_us, out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "algorithm_traces: %s\n", e.what());
    return 1;
  }
  print_summary(traces);
  std::printf("data in %s\n", out.c_str());
  const std::size_t faults = report_faults(traces);
  return run.errors == 0 && faults == 0 ? 0 : 1;
}
