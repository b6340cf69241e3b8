#include "config_watch.hpp"

#include <sys/stat.h>

#include <string>

#include "rate_limit_config.hpp"

namespace redlimit_server {
namespace {

/// A file's name, inode, size, and times of last write and last change, as one line. Why the
/// inode and the change time: a file replaced by another (a rename), or written with its old
/// write time put back (`cp -p`, `rsync -a`), may keep its size and write time.
std::string describe(const std::filesystem::path& file) {
  struct stat status {};
  if (stat(file.c_str(), &status) != 0) return file.string() + " unreadable\n";
  return file.string() + " " + std::to_string(status.st_ino) + " " +
         std::to_string(status.st_size) + " " + std::to_string(status.st_mtim.tv_sec) + "." +
         std::to_string(status.st_mtim.tv_nsec) + " " + std::to_string(status.st_ctim.tv_sec) +
         "." + std::to_string(status.st_ctim.tv_nsec) + "\n";
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
