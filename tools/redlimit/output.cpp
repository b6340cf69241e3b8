#include "output.hpp"

#include <cstdio>

namespace redlimit_cli {

void print_out(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

void print_json(const JsonWriter& json) {
  print_out(json.str() + "\n");
}

void print_error(std::string_view message) {
  std::fprintf(stderr, "redlimit: %.*s\n", static_cast<int>(message.size()), message.data());
}

}  // namespace redlimit_cli
