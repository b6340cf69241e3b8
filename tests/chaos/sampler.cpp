#include "chaos/sampler.hpp"

#include <filesystem>
#include <fstream>
#include <string>

#include "chaos/call_log.hpp"

namespace redlimit::chaos {
namespace {

long long stats_field(const std::string& text, const std::string& field) {
  const auto at = text.find(field + ":");
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + field.size() + 1));
}

long rss_kb(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

int open_fds(pid_t pid) {
  std::error_code error;
  int count = 0;
  for (std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", error), end;
       !error && it != end; it.increment(error)) {
    ++count;
  }
  return error ? -1 : count;
}

}  // namespace

Sampler::Sampler(const test::RedisServer* redis, const Fleet& fleet,
                 std::atomic<long long>& own_connections)
    : redis_(redis), fleet_(fleet), own_connections_(own_connections), thread_([this] { run(); }) {}

Sampler::~Sampler() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void Sampler::finish(std::vector<ConnectionSample>& connections,
                     std::vector<ProcessSample>& processes) {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  connections = std::move(connections_);
  processes = std::move(processes_);
}

void Sampler::run() {
  for (int tick = 0; !stopping_; ++tick) {
    if (redis_ != nullptr) sample_connections();
    if (tick % 4 == 0) sample_processes();
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

void Sampler::sample_connections() {
  ConnectionSample sample;
  sample.own = ++own_connections_;  // this sample's own connection
  try {
    const Reply reply = redis_->command({"INFO", "stats"});
    if (reply.type != Reply::Type::string) return;
    sample.received = stats_field(reply.str, "total_connections_received");
    sample.rejected = stats_field(reply.str, "rejected_connections");
  } catch (const std::exception&) {
    return;  // Redis down or refusing: no sample
  }
  sample.at_ns = monotonic_ns();
  connections_.push_back(sample);
}

void Sampler::sample_processes() {
  const std::int64_t now = monotonic_ns();
  for (const auto& [index, pid] : fleet_.live()) {
    const long rss = rss_kb(pid);
    const int fds = open_fds(pid);
    if (rss >= 0 && fds >= 0) processes_.push_back({index, now, rss, fds});
  }
}

}  // namespace redlimit::chaos
