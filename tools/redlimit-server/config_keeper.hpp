#pragma once
/// @file config_keeper.hpp
/// ConfigKeeper: the configuration in force, read again when its files change, its limits
/// written to the central store before the workers take it.

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "config_watch.hpp"
#include "rate_limit_config.hpp"
#include "redlimit/client.hpp"
#include "redlimit/task.hpp"
#include "worker.hpp"

namespace redlimit_server {

/// Loads the configuration in `path` (load_config()), and logs a warning for each field it
/// ignored. Throws as load_config() does.
RateLimitConfig load_and_warn(const std::filesystem::path& path, bool merge_domains);

/// Keeps the workers' configuration: each look() reads the files again when they changed, writes
/// the limits of a configuration read to the central store (from the first worker's Client,
/// without blocking the caller's loop), and hands it to every worker once they are written. A
/// configuration that cannot be used is logged and the last good one stays; limits that could
/// not be written are tried again at the next look, as are limits a worker found missing from
/// the store (a Redis restart that lost them). Use on one thread (the main loop's).
class ConfigKeeper {
 public:
  /// `path` and `merge_domains` are read as load_config() reads them. `first` is in force
  /// already (the workers were made with it); `watch` took the files before it was read, so
  /// that a change made since is read at the first look. `central`: limits are written to the store
  /// (else each worker takes a configuration as soon as it is read). `missing` is what the workers
  /// set when a limit is missing from the central store (DeciderOptions::on_policy_missing).
  ConfigKeeper(ConfigWatch watch, std::filesystem::path path, bool merge_domains,
               std::vector<std::unique_ptr<Worker>>& workers, std::string prefix, bool central,
               std::shared_ptr<const RateLimitConfig> first,
               std::shared_ptr<std::atomic<bool>> missing);

  /// Writes the first configuration's limits and waits for it, at most 30 s: false (logged)
  /// when Redis could not take them (written again at the next look).
  bool publish_first();
  /// One look at the files and at a write in flight.
  void look();

 private:
  /// A write of `config`'s limits in flight.
  struct Write;

  /// Writes `write`'s limits from a worker's Client, then says how it went.
  static redlimit::Task<void> write_limits(redlimit::Client& client, std::shared_ptr<Write> write,
                                           std::string prefix);
  void start_write(std::shared_ptr<const RateLimitConfig> config);
  void put_in_force(std::shared_ptr<const RateLimitConfig> config);

  ConfigWatch watch_;
  std::filesystem::path path_;
  bool merge_domains_;
  std::vector<std::unique_ptr<Worker>>& workers_;
  std::string prefix_;
  bool central_;
  std::shared_ptr<const RateLimitConfig> current_;
  std::shared_ptr<const RateLimitConfig> pending_;  ///< read, its limits not yet written
  std::shared_ptr<Write> writing_;
  std::shared_ptr<std::atomic<bool>> missing_;
};

}  // namespace redlimit_server
