#include "output.hpp"

#include <cstdio>
#include <stdexcept>

namespace redlimit_cli {

void print_out(std::string_view text) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    throw std::runtime_error("cannot write to the standard output");
  }
}

void print_json(const JsonWriter& json) {
  print_out(json.str() + "\n");
}

void print_error(std::string_view message) {
  std::fprintf(stderr, "redlimit: %.*s\n", static_cast<int>(message.size()), message.data());
}

}  // namespace redlimit_cli
