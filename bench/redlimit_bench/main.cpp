// redlimit_bench: decisions per second and latency of try_acquire, per algorithm, in flight,
// key space and connection count, with the client's CPU and allocations and the server's time
// per decision and memory per key. Prints one JSON object per case, then a table (or only the
// JSON with --json).
//
// usage: redlimit_bench [--url URL [--tls-ca FILE]] [--algorithms gcra,...|all]
//                       [--in-flight 1,16,256,1024]
//                       [--keys 100000,1] [--connections 1] [--seconds 2] [--json]
//                       [--slots FIRST-LAST] [--max-batches-in-flight N] [--period-ms MS]
//        redlimit_bench [--url URL] [--period-ms MS] --print-evalsha
//        (URL defaults to $REDLIMIT_URL; scripts/with-redis starts a private server)
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_case.hpp"
#include "decide_command.hpp"

namespace {

std::string optional_figure(const std::optional<double>& value, const char* format) {
  if (!value) return "null";
  char text[32];
  std::snprintf(text, sizeof text, format, *value);
  return text;
}

void print_json(const BenchResult& r) {
  std::printf(
      "{\"bench\":\"try_acquire\",\"algorithm\":\"%s\",\"in_flight\":%d,\"keys\":%d,"
      "\"connections\":%d,\"max_batch\":%d,\"seconds\":%.3f,\"decisions\":%lld,\"allowed\":%lld,"
      "\"errors\":%lld,"
      "\"per_second\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,"
      "\"client_cpu_us\":%.2f,\"server_usec_per_call\":%s,\"server_usec_per_decision\":%s,"
      "\"mean_batch\":%s,\"allocations_per_decision\":%s,\"key_bytes\":%s}\n",
      std::string(redlimit::to_string(r.config.algorithm)).c_str(), r.config.in_flight,
      r.config.keys, r.config.connections, r.config.max_batch, r.seconds,
      static_cast<long long>(r.decisions), static_cast<long long>(r.allowed),
      static_cast<long long>(r.errors), r.per_second, r.p50_us, r.p99_us, r.p999_us,
      r.client_cpu_us, optional_figure(r.server_usec_per_call, "%.2f").c_str(),
      optional_figure(r.server_usec_per_decision, "%.2f").c_str(),
      optional_figure(r.mean_batch, "%.1f").c_str(),
      optional_figure(r.allocations_per_decision, "%.1f").c_str(),
      optional_figure(r.key_bytes, "%.0f").c_str());
  std::fflush(stdout);
}

void print_table(const std::vector<BenchResult>& results) {
  std::printf("\n%-23s %7s %9s %5s %5s %10s %8s %8s %8s %8s %8s %7s %6s %7s %6s\n", "algorithm",
              "keys", "in flight", "conns", "max b", "decisions/s", "p50 us", "p99 us", "p99.9 us",
              "cpu us", "srv us", "srv/dec", "batch", "allocs", "bytes");
  for (const BenchResult& r : results) {
    std::printf("%-23s %7d %9d %5d %5d %10.0f %8.1f %8.1f %8.1f %8.2f %8s %7s %6s %7s %6s\n",
                std::string(redlimit::to_string(r.config.algorithm)).c_str(), r.config.keys,
                r.config.in_flight, r.config.connections, r.config.max_batch, r.per_second,
                r.p50_us, r.p99_us, r.p999_us, r.client_cpu_us,
                optional_figure(r.server_usec_per_call, "%.2f").c_str(),
                optional_figure(r.server_usec_per_decision, "%.2f").c_str(),
                optional_figure(r.mean_batch, "%.1f").c_str(),
                optional_figure(r.allocations_per_decision, "%.1f").c_str(),
                optional_figure(r.key_bytes, "%.0f").c_str());
  }
  std::printf(
      "\nmax b: ClientOptions::max_batch; cpu us: this process's CPU per decision; "
      "srv us: EVALSHA usec_per_call (INFO commandstats; a batch is one call); srv/dec: the "
      "server's EVALSHA time per decision; batch: decisions per EVALSHA call (the mean batch); "
      "allocs: heap allocations per decision in this process; bytes: MEMORY USAGE of one "
      "limiter key.\n");
}

/// Loads the script a gcra decision runs and prints the gcra decision command for redis-benchmark,
/// one shell-quoted word per line after "EVALSHA", with __rand_int__ in the key.
redlimit::Task<void> print_evalsha(redlimit::Client& client, std::chrono::milliseconds period) {
  const DecideCommand command = decide_command(bench_policy(redlimit::Algorithm::gcra, period),
                                               bench_prefix, "bench-gcra", "k__rand_int__");
  co_await client.command("SCRIPT", "LOAD", command.source);
  std::printf("EVALSHA\n%s\n", command.sha1.c_str());
  for (const std::string& argument : command.arguments)
    std::printf("'%s'\n", argument.c_str());
  co_await client.close();
}

redlimit::Task<std::vector<BenchResult>> run_all(
    uv_loop_t* loop, redlimit::Client& admin, redlimit::ClientOptions connection,
    std::vector<redlimit::Algorithm> algorithms, std::vector<int> in_flight, std::vector<int> keys,
    std::vector<int> connections, std::vector<int> max_batches, double seconds,
    std::optional<std::pair<std::uint16_t, std::uint16_t>> slots, std::chrono::milliseconds period,
    bool json_only) {
  std::vector<BenchResult> results;
  for (const redlimit::Algorithm algorithm : algorithms) {
    for (const int key_count : keys) {
      for (const int flying : in_flight) {
        for (const int conns : connections) {
          for (const int batch : max_batches) {
            const BenchCase config{algorithm, flying, key_count, conns,
                                   seconds,   batch,  slots,     period};
            results.push_back(co_await run_case(loop, connection, admin, config));
            print_json(results.back());
          }
        }
      }
    }
  }
  co_await admin.close();
  if (!json_only) print_table(results);
  co_return results;
}

std::vector<redlimit::Algorithm> parse_algorithms(const std::vector<std::string>& names) {
  using redlimit::Algorithm;
  const std::vector<Algorithm> all = {
      Algorithm::gcra,         Algorithm::token_bucket,       Algorithm::leaky_bucket,
      Algorithm::fixed_window, Algorithm::sliding_window_log, Algorithm::sliding_window_counter};
  std::vector<Algorithm> chosen;
  for (const std::string& name : names) {
    if (name == "all") return all;
    bool known = false;
    for (const Algorithm algorithm : all) {
      if (redlimit::to_string(algorithm) == name) {
        chosen.push_back(algorithm);
        known = true;
      }
    }
    if (!known) throw CLI::ValidationError("--algorithms", "unknown algorithm " + name);
  }
  return chosen;
}

/// The slots of "FIRST-LAST" (two cluster slots, FIRST <= LAST); nullopt for "" or any other
/// text.
std::optional<std::pair<std::uint16_t, std::uint16_t>> parse_slots(const std::string& text) {
  unsigned first = 0, last = 0;
  char end = 0;
  if (std::sscanf(text.c_str(), "%u-%u%c", &first, &last, &end) != 2 || first > last ||
      last >= 16384)
    return std::nullopt;
  return std::pair{static_cast<std::uint16_t>(first), static_cast<std::uint16_t>(last)};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"redlimit_bench: throughput and latency of try_acquire on Redis"};
  const char* env_url = std::getenv("REDLIMIT_URL");
  std::string url = env_url != nullptr ? env_url : "redis://127.0.0.1:6379";
  std::vector<std::string> algorithms = {"all"};
  std::vector<int> in_flight = {1, 16, 256, 1024};
  std::vector<int> keys = {100'000, 1};
  std::vector<int> connections = {1};
  std::vector<int> max_batches = {64};
  double seconds = 2;
  bool json_only = false;
  bool evalsha = false;
  int replicas = 0;
  std::size_t batches_in_flight = redlimit::ClientOptions{}.max_batches_in_flight;
  std::string tls_ca;
  std::string slots;
  std::int64_t period_ms = 1000;
  app.add_option("--url", url, "Redis URL (default: $REDLIMIT_URL)");
  app.add_option("--tls-ca", tls_ca,
                 "rediss:// URLs: the CA file the server's certificate is "
                 "checked against (TlsOptions::ca_file)");
  app.add_option("--algorithms", algorithms, "algorithms, or all")->delimiter(',');
  app.add_option("--in-flight", in_flight, "decisions in flight at once")
      ->delimiter(',')
      ->check(CLI::Range(1, 65'536));
  app.add_option("--keys", keys, "key spaces (1: one hot key)")
      ->delimiter(',')
      ->check(CLI::Range(1, 100'000'000));
  app.add_option("--connections", connections, "clients (connections) sharing the load")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  app.add_option("--max-batch", max_batches,
                 "ClientOptions::max_batch: decisions per script call at most (1: one each)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024));
  app.add_option("--seconds", seconds, "length of each case")->check(CLI::Range(0.05, 3600.0));
  app.add_option("--max-batches-in-flight", batches_in_flight,
                 "ClientOptions::max_batches_in_flight: batches of one server in flight at once "
                 "(0: no limit)")
      ->capture_default_str();
  app.add_option("--replicas", replicas,
                 "ClientOptions::replicas: admissions answered once this many replicas hold them")
      ->check(CLI::Range(0, 16));
  app.add_option("--slots", slots,
                 "FIRST-LAST: only keys of these cluster slots (the first --keys of them), as "
                 "one node serves")
      ->check([](const std::string& text) {
        return parse_slots(text) ? std::string() : "expected FIRST-LAST within 0-16383";
      });
  app.add_option("--period-ms", period_ms,
                 "the policy: 1000 permits per this many ms per key, burst 1000 (1000000 keeps "
                 "every key's state for the run)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1'000'000'000}))
      ->capture_default_str();
  app.add_flag("--json", json_only, "only the JSON lines, no table");
  app.add_flag("--print-evalsha", evalsha,
               "load the script of a gcra decision, print its command for redis-benchmark");
  CLI11_PARSE(app, argc, argv);

  uv_loop_t loop;
  uv_loop_init(&loop);
  int status = 0;
  try {
    redlimit::ClientOptions connection{.url = url, .replicas = replicas};
    connection.max_batches_in_flight = batches_in_flight;
    connection.tls.ca_file = tls_ca;
    redlimit::Client admin(&loop, connection);
    if (evalsha) {
      redlimit::run(&loop, print_evalsha(admin, std::chrono::milliseconds(period_ms)));
    } else {
      const auto results = redlimit::run(
          &loop, run_all(&loop, admin, connection, parse_algorithms(algorithms), in_flight, keys,
                         connections, max_batches, seconds, parse_slots(slots),
                         std::chrono::milliseconds(period_ms), json_only));
      for (const BenchResult& r : results)
        if (r.errors > 0) status = 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "redlimit_bench: %s\n", e.what());
    status = 1;
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&loop) != 0) {
    std::fprintf(stderr, "redlimit_bench: a uv handle was left open\n");
    status = 1;
  }
  return status;
}
