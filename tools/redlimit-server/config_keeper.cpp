#include "config_keeper.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>

#include "policy_publisher.hpp"
#include "redlimit/runtime.hpp"

namespace redlimit_server {

RateLimitConfig load_and_warn(const std::filesystem::path& path, bool merge_domains) {
  RateLimitConfig config = load_config(path, merge_domains);
  for (const auto& [name, domain] : config.domains) {
    for (const std::string& ignored : domain.ignored)
      spdlog::warn("redlimit-server: {}", ignored);
  }
  return config;
}

struct ConfigKeeper::Write {
  enum State { running, written, failed };
  std::shared_ptr<const RateLimitConfig> config;
  std::atomic<State> state{running};
  int count = 0;      ///< limits written (once written)
  std::string error;  ///< once failed
};

ConfigKeeper::ConfigKeeper(ConfigWatch watch, std::filesystem::path path, bool merge_domains,
                           std::vector<std::unique_ptr<Worker>>& workers, std::string prefix,
                           bool central, std::shared_ptr<const RateLimitConfig> first,
                           std::shared_ptr<std::atomic<bool>> missing)
    : watch_(std::move(watch)),
      path_(std::move(path)),
      merge_domains_(merge_domains),
      workers_(workers),
      prefix_(std::move(prefix)),
      central_(central),
      current_(std::move(first)),
      missing_(std::move(missing)) {}

bool ConfigKeeper::publish_first() {
  if (!central_) return true;
  start_write(current_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (writing_->state.load(std::memory_order_acquire) == Write::running &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const bool written = writing_->state.load(std::memory_order_acquire) == Write::written;
  if (!written) {
    spdlog::error(
        "redlimit-server: the limits could not be written to the central store (tried "
        "again at the next look): {}",
        writing_->state == Write::running ? "no answer within 30 s" : writing_->error);
    pending_ = current_;
  }
  // Why kept when still running: the worker's task holds its own reference and ends later.
  writing_.reset();
  return written;
}

void ConfigKeeper::look() {
  if (watch_.changed()) {
    try {
      pending_ = std::make_shared<const RateLimitConfig>(load_and_warn(path_, merge_domains_));
    } catch (const std::exception& e) {
      spdlog::error("redlimit-server: configuration not reloaded, the last good one stays: {}",
                    e.what());
    }
  }
  if (missing_->exchange(false, std::memory_order_relaxed) && central_ && !pending_) {
    spdlog::warn("redlimit-server: a limit is missing from the central store; writing them again");
    pending_ = current_;
  }
  if (writing_) {
    switch (writing_->state.load(std::memory_order_acquire)) {
      case Write::running:
        return;
      case Write::written:
        if (writing_->count > 0) {
          spdlog::info("redlimit-server: {} limit(s) written to the central store",
                       writing_->count);
        }
        if (pending_ == writing_->config) pending_.reset();
        put_in_force(writing_->config);
        break;
      case Write::failed:
        spdlog::error(
            "redlimit-server: the limits could not be written to the central store "
            "(tried again at the next look): {}",
            writing_->error);
        break;
    }
    writing_.reset();
  }
  if (!pending_) return;
  if (central_) {
    start_write(pending_);
  } else {
    put_in_force(std::move(pending_));
    pending_.reset();
  }
}

void ConfigKeeper::start_write(std::shared_ptr<const RateLimitConfig> config) {
  writing_ = std::make_shared<Write>();
  writing_->config = std::move(config);
  workers_.front()->post([write = writing_, prefix = prefix_](Decider& decider, uv_loop_t* loop) {
    redlimit::spawn(loop, write_limits(decider.client(), write, prefix));
  });
}

void ConfigKeeper::put_in_force(std::shared_ptr<const RateLimitConfig> config) {
  if (config == current_) return;
  for (const auto& worker : workers_) {
    worker->post([config](Decider& decider, uv_loop_t*) { decider.replace_config(config); });
  }
  spdlog::info("redlimit-server: configuration reloaded: {} domain(s)", config->domains.size());
  current_ = std::move(config);
}

redlimit::Task<void> ConfigKeeper::write_limits(redlimit::Client& client,
                                                std::shared_ptr<Write> write, std::string prefix) {
  try {
    write->count = co_await publish_policies(client, *write->config, prefix);
    write->state.store(Write::written, std::memory_order_release);
  } catch (const std::exception& e) {
    write->error = e.what();
    write->state.store(Write::failed, std::memory_order_release);
  }
}

}  // namespace redlimit_server
