#include "launcher.hpp"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace {

using Clock = std::chrono::steady_clock;

/// Reads "progress ..." and "done ..." lines (see node_process.hpp) into `progress`.
void parse_report(const std::string& line, NodeProgress& progress) {
  std::istringstream fields(line);
  std::string what;
  fields >> what;
  if (what != "progress" && what != "done") return;
  fields >> progress.sent >> progress.accepted >> progress.rejected >> progress.errors;
  if (what == "done") {
    int lost = 0;
    fields >> lost;
    progress.provider_lost = lost != 0;
    progress.done = true;
  }
}

}  // namespace

Launcher::Launcher(uv_loop_t* loop, DispatchSettings settings, std::string self)
    : loop_(loop),
      settings_(std::move(settings)),
      self_(std::move(self)),
      display_(isatty(STDOUT_FILENO) != 0, Clock::now()) {}

redlimit::Task<DispatchReport> Launcher::run() {
  DispatchReport report;
  const int provider_port = co_await start_provider();
  if (!settings_.local && !settings_.no_limit) {
    report.redis_url = settings_.redis_url;
    if (report.redis_url.empty()) {
      redis_ = co_await PrivateRedis::start(loop_);
      report.redis_url = redis_->url();
    }
  }

  std::stop_source stop_display;
  redlimit::TaskGroup display;
  display.add(show_progress(stop_display.get_token()));
  const auto started = Clock::now();
  std::exception_ptr failure;
  try {
    if (settings_.local) {
      report.failed_nodes = co_await run_local_nodes(provider_port);
    } else {
      report.failed_nodes = co_await run_node_processes(provider_port, report.redis_url);
    }
  } catch (...) {
    failure = std::current_exception();
  }
  report.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  stop_display.request_stop();
  co_await display.join();
  display_.finish(Clock::now(), progress());

  for (const NodeProgress& node : progress()) {
    report.sent += node.sent;
    report.retried += node.errors;
  }
  provider_->kill(SIGTERM);
  const int provider_status = co_await provider_->exited();
  report.provider = provider_report_;
  report.interrupted = interrupted_;
  if (redis_) co_await redis_->stop();
  if (!provider_reported_ && !failure) {
    failure = std::make_exception_ptr(std::runtime_error("the provider died (exit status " +
                                                         std::to_string(provider_status) +
                                                         ") before reporting what it saw"));
  }
  if (failure) std::rethrow_exception(failure);
  co_return report;
}

redlimit::Task<int> Launcher::start_provider() {
  provider_ = std::make_unique<ChildProcess>(
      loop_, std::vector<std::string>{self_, "provider", "--rate", std::to_string(settings_.rate)},
      [this](const std::string& line) {
        if (line.rfind("listening ", 0) == 0) provider_port_ = std::stoi(line.substr(10));
        if (parse_provider_report(line, provider_report_)) provider_reported_ = true;
      });
  for (int attempt = 0; attempt < 250 && provider_->running(); ++attempt) {
    if (provider_port_ != 0) co_return provider_port_;
    co_await redlimit::sleep_for(loop_, std::chrono::milliseconds(20));
  }
  const bool exited = !provider_->running();
  provider_->kill(SIGKILL);
  const int status = co_await provider_->exited();
  throw std::runtime_error(exited ? "the provider exited (status " + std::to_string(status) +
                                        ") before listening"
                                  : std::string("the provider did not start within 5 s"));
}

void Launcher::interrupt() {
  interrupted_ = true;
  for (const auto& process : processes_)
    process->kill(SIGTERM);
  if (provider_) provider_->kill(SIGTERM);
}

redlimit::Task<int> Launcher::run_local_nodes(int provider_port) {
  if (!settings_.no_limit) {
    local_limiter_.emplace(loop_, dispatch_policy(settings_),
                           redlimit::LimiterOptions{.name = "sms"});
  }
  redlimit::TaskGroup nodes;
  for (int i = 0; i < settings_.nodes; ++i) {
    local_nodes_.push_back(std::make_unique<Node>(
        loop_, local_limiter_ ? &*local_limiter_ : nullptr,
        NodeSettings{.id = i + 1,
                     .messages = messages_for_node(settings_.messages, settings_.nodes, i),
                     .provider_port = provider_port}));
    nodes.add(local_nodes_.back()->run());
  }
  co_await nodes.join();
  int failed = 0;
  for (const auto& node : local_nodes_)
    if (node->progress().provider_lost) ++failed;
  co_return failed;
}

redlimit::Task<int> Launcher::run_node_processes(int provider_port, const std::string& redis_url) {
  reported_.resize(static_cast<std::size_t>(settings_.nodes));
  for (int i = 0; i < settings_.nodes; ++i) {
    const std::int64_t messages = messages_for_node(settings_.messages, settings_.nodes, i);
    reported_[i].queued = messages;
    std::vector<std::string> args = {self_,
                                     "node",
                                     "--id",
                                     std::to_string(i + 1),
                                     "--messages",
                                     std::to_string(messages),
                                     "--provider-port",
                                     std::to_string(provider_port),
                                     "--rate",
                                     std::to_string(settings_.rate),
                                     "--algorithm",
                                     settings_.algorithm,
                                     "--margin",
                                     std::to_string(settings_.margin),
                                     "--replicas",
                                     std::to_string(settings_.replicas)};
    if (settings_.no_limit) {
      args.push_back("--no-limit");
    } else {
      args.insert(args.end(), {"--redis", redis_url});
      if (!settings_.tls_ca.empty()) args.insert(args.end(), {"--tls-ca", settings_.tls_ca});
    }
    processes_.push_back(std::make_unique<ChildProcess>(
        loop_, args, [this, i](const std::string& line) { parse_report(line, reported_[i]); }));
  }
  int failed = 0;
  for (const auto& process : processes_) {
    if (co_await process->exited() != 0) ++failed;
  }
  co_return failed;
}

redlimit::Task<void> Launcher::show_progress(std::stop_token stop) {
  for (;;) {
    try {
      co_await redlimit::sleep_for(loop_, std::chrono::milliseconds(250), stop);
    } catch (const redlimit::Cancelled&) {
      co_return;
    }
    display_.tick(Clock::now(), progress());
  }
}

std::vector<NodeProgress> Launcher::progress() const {
  if (!settings_.local) return reported_;
  std::vector<NodeProgress> nodes;
  for (const auto& node : local_nodes_)
    nodes.push_back(node->progress());
  return nodes;
}
