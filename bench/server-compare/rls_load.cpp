// rls_load: drives a RateLimitService (redlimit-server, or null_rls_server for the ceiling) with
// a fixed number of ShouldRateLimit calls in flight for a while, one descriptor per call on a
// random key, and prints one JSON line: calls/s, latency percentiles, the CPU per call of the
// server, of its Redis and of this client (all three share the machine), and the server's
// thread switches per call. Figures only; nothing is asserted. With --connections C the calls
// are spread over C connections, as an Envoy with C worker threads opens one each.
//
// usage: rls_load --target HOST:PORT [--in-flight N] [--seconds S] [--keys K] [--server-pid P]
//                 [--redis-pid P] [--label TEXT] [--connections C]
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <vector>

#include "rls.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
using envoy::service::ratelimit::v3::RateLimitRequest;
using envoy::service::ratelimit::v3::RateLimitResponse;
using envoy::service::ratelimit::v3::RateLimitService;

struct Options {
  std::string target;
  int in_flight = 64;
  double seconds = 2;
  int keys = 100'000;
  int server_pid = 0;
  int redis_pid = 0;
  std::string label = "server";
  int connections = 1;
};

/// The CPU time (user + system) the process `pid` has used, in seconds; 0 if unknown.
double cpu_seconds(int pid) {
  if (pid <= 0) return 0;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t end = text.rfind(')');
  if (end == std::string::npos) return 0;
  std::istringstream fields(text.substr(end + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

/// How many times the threads of the process `pid` were switched out (given up the CPU or
/// preempted) so far; 0 if unknown.
double switches(int pid) {
  if (pid <= 0) return 0;
  double total = 0;
  std::error_code error;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks, error)) {
    std::ifstream in(task.path() / "status");
    std::string line;
    while (std::getline(in, line)) {
      if (line.starts_with("voluntary_ctxt_switches:") ||
          line.starts_with("nonvoluntary_ctxt_switches:"))
        total += std::stod(line.substr(line.find(':') + 1));
    }
  }
  return total;
}

/// Keeps `in_flight` calls going until the deadline; records each call's latency.
class Load {
 public:
  Load(const Options& options, const std::vector<std::shared_ptr<grpc::Channel>>& channels)
      : options_(options) {
    for (const auto& channel : channels)
      clients_.push_back(RateLimitService::NewStub(channel));
  }

  void run() {
    deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(options_.seconds));
    for (int i = 0; i < options_.in_flight; ++i)
      start(static_cast<std::uint64_t>(i));
    std::unique_lock lock(mutex_);
    ended_.wait(lock, [this] { return running_ == 0; });
  }

  std::vector<double> latencies_us;
  std::uint64_t errors = 0;
  std::uint64_t over_limit = 0;

 private:
  struct Call {
    grpc::ClientContext context;
    RateLimitRequest request;
    RateLimitResponse response;
    Clock::time_point started;
  };

  /// Starts a call; `counted`: a new slot (else it takes the slot of the call that just ended).
  void start(std::uint64_t seed, bool counted = true) {
    if (counted) {
      std::lock_guard lock(mutex_);
      ++running_;
    }
    auto* call = new Call;
    call->request.set_domain("bench");
    auto* entry = call->request.add_descriptors()->add_entries();
    entry->set_key("user");
    entry->set_value(std::to_string(std::minstd_rand(static_cast<std::uint32_t>(seed))() %
                                    static_cast<std::uint32_t>(options_.keys)));
    call->started = Clock::now();
    clients_[next_client_.fetch_add(1) % clients_.size()]->async()->ShouldRateLimit(
        &call->context, &call->request, &call->response,
        [this, call](grpc::Status status) { finish(call, status); });
  }

  void finish(Call* call, const grpc::Status& status) {
    const auto now = Clock::now();
    const double latency = std::chrono::duration<double, std::micro>(now - call->started).count();
    const bool over = call->response.overall_code() == RateLimitResponse::OVER_LIMIT;
    delete call;
    bool again = false;
    {
      std::lock_guard lock(mutex_);
      latencies_us.push_back(latency);
      errors += status.ok() ? 0 : 1;
      over_limit += over ? 1 : 0;
      again = now < deadline_;
      // Why only when not starting another: the next call keeps this slot running, so run()
      // cannot return (and this object go) while start() still uses it.
      if (!again && --running_ == 0) ended_.notify_all();
    }
    if (again) start(next_seed_.fetch_add(1) * 2654435761u, false);
  }

  const Options& options_;
  std::vector<std::unique_ptr<RateLimitService::Stub>> clients_;
  Clock::time_point deadline_;
  std::mutex mutex_;
  std::condition_variable ended_;
  int running_ = 0;
  std::atomic<std::uint64_t> next_seed_{1'000'003};
  std::atomic<std::size_t> next_client_{0};  ///< the calls take the connections in turn
};

double percentile(std::vector<double>& values, double p) {
  if (values.empty()) return 0;
  const std::size_t at = std::min(values.size() - 1, static_cast<std::size_t>(p * values.size()));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(at), values.end());
  return values[at];
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"Drives a RateLimitService and prints calls/s, latency and server CPU per call"};
  app.add_option("--target", options.target, "HOST:PORT")->required();
  app.add_option("--in-flight", options.in_flight, "calls in flight")->capture_default_str();
  app.add_option("--seconds", options.seconds, "how long")->capture_default_str();
  app.add_option("--keys", options.keys, "distinct descriptor values")->capture_default_str();
  app.add_option("--server-pid", options.server_pid,
                 "the server, for its CPU and thread switches per call");
  app.add_option("--redis-pid", options.redis_pid, "the server's Redis, for its CPU per call");
  app.add_option("--label", options.label, "the JSON line's label")->capture_default_str();
  app.add_option("--connections", options.connections, "connections the calls are spread over")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);

  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < options.connections; ++i) {
    // Why a local subchannel pool: channels to one target share a connection otherwise.
    grpc::ChannelArguments arguments;
    arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    channels.push_back(
        grpc::CreateCustomChannel(options.target, grpc::InsecureChannelCredentials(), arguments));
  }
  // Why a brief run first: connections and the server's first limiters are made then.
  Options brief = options;
  brief.seconds = std::min(0.2, options.seconds);
  Load(brief, channels).run();

  Load load(options, channels);
  const int self = static_cast<int>(getpid());
  const double cpu_before = cpu_seconds(options.server_pid);
  const double redis_before = cpu_seconds(options.redis_pid);
  const double self_before = cpu_seconds(self);
  const double switches_before = switches(options.server_pid);
  const auto started = Clock::now();
  load.run();
  const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
  const double cpu = cpu_seconds(options.server_pid) - cpu_before;
  const double redis_cpu = cpu_seconds(options.redis_pid) - redis_before;
  const double self_cpu = cpu_seconds(self) - self_before;
  const double switched = switches(options.server_pid) - switches_before;
  const auto calls = static_cast<double>(load.latencies_us.size());
  const auto per_call = [calls](double total, double scale) {
    return calls > 0 ? total * scale / calls : 0.0;
  };
  std::printf(
      "{\"label\":\"%s\",\"in_flight\":%d,\"calls\":%.0f,\"calls_per_s\":%.0f,\"p50_us\":%.0f,"
      "\"p99_us\":%.0f,\"errors\":%llu,\"over_limit\":%llu,\"server_cpu_us_per_call\":%.1f,"
      "\"redis_cpu_us_per_call\":%.1f,\"load_cpu_us_per_call\":%.1f,"
      "\"server_switches_per_call\":%.2f}\n",
      options.label.c_str(), options.in_flight, calls, calls / elapsed,
      percentile(load.latencies_us, 0.50), percentile(load.latencies_us, 0.99),
      static_cast<unsigned long long>(load.errors),
      static_cast<unsigned long long>(load.over_limit), per_call(cpu, 1e6),
      per_call(redis_cpu, 1e6), per_call(self_cpu, 1e6), per_call(switched, 1));
  return load.errors == 0 ? 0 : 1;
}
