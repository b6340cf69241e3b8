#include "config_watch.hpp"

#include <algorithm>
#include <system_error>
#include <vector>

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
  std::error_code error;
  if (!std::filesystem::is_directory(path_, error)) return describe(path_);
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(path_, error)) {
    const auto extension = entry.path().extension();
    if (extension == ".yaml" || extension == ".yml") files.push_back(describe(entry.path()));
  }
  // Why sorted: a directory lists its files in no fixed order.
  std::sort(files.begin(), files.end());
  std::string out;
  for (const std::string& file : files)
    out += file;
  return out;
}

}  // namespace redlimit_server
