#pragma once

#include <spdlog/spdlog.h>

#include <memory>

namespace redlimit::detail {

/// The logger redlimit uses when none is given: the one registered as "redlimit" if the
/// application registered one, else a private stderr logger of that name. spdlog's global
/// settings and registry are never changed.
std::shared_ptr<spdlog::logger> default_logger();

}  // namespace redlimit::detail
