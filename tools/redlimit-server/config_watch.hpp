#pragma once
/// @file config_watch.hpp
/// ConfigWatch: tells when the configuration files changed, by their names, inodes, sizes and
/// times.

#include <filesystem>
#include <string>

namespace redlimit_server {

/// Compares the configuration path's files (config_files()) with what they were at the last
/// look.
class ConfigWatch {
 public:
  /// Takes the files as they are now.
  explicit ConfigWatch(std::filesystem::path path);
  /// Whether a file was added, removed or written since the last look (then remembers them
  /// as they are now).
  bool changed();

 private:
  std::string fingerprint() const;

  std::filesystem::path path_;
  std::string last_;
};

}  // namespace redlimit_server
