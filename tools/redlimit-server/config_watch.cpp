#include "config_watch.hpp"

#include <system_error>

#include "rate_limit_config.hpp"

namespace redlimit_server {
namespace {

/// A file's name, size and time of last write, as one line.
std::string describe(const std::filesystem::path& file) {
  std::error_code error;
  const auto size = std::filesystem::file_size(file, error);
  const auto written = std::filesystem::last_write_time(file, error);
  if (error) return file.string() + " unreadable\n";
  return file.string() + " " + std::to_string(size) + " " +
         std::to_string(written.time_since_epoch().count()) + "\n";
}

}  // namespace

ConfigWatch::ConfigWatch(std::filesystem::path path)
    : path_(std::move(path)), last_(fingerprint()) {}

bool ConfigWatch::changed() {
  std::string now = fingerprint();
  if (now == last_) return false;
  last_ = std::move(now);
  return true;
}

std::string ConfigWatch::fingerprint() const {
  std::string out;
  try {
    for (const std::filesystem::path& file : config_files(path_))
      out += describe(file);
  } catch (const ConfigFileError& e) {
    out = e.what();  // changed when it can be listed again
  }
  return out;
}

}  // namespace redlimit_server
