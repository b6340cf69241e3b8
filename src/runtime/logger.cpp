#include "runtime/logger.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace redlimit::detail {

std::shared_ptr<spdlog::logger> default_logger() {
  if (auto registered = spdlog::get("redlimit")) return registered;
  static const auto own = std::make_shared<spdlog::logger>(
      "redlimit", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  return own;
}

}  // namespace redlimit::detail
