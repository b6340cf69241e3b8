#pragma once

#include <exception>
#include <string>
#include <string_view>

namespace redlimit::detail {

/// The first word of a Redis error message: "NOSCRIPT", "MOVED", "ERR", ...
std::string error_code(std::string_view message);

/// True for replies that mean the caller lacks a permission or credentials: NOPERM, NOAUTH,
/// WRONGPASS, and a command inside a script that the ACL user may not run.
bool is_permission_error(std::string_view message);

/// The exception an error reply becomes: ConfigError for permission errors (with `hint`
/// appended), ReplyError carrying the code otherwise.
std::exception_ptr exception_from_error(std::string_view message, std::string_view hint = {});

}  // namespace redlimit::detail
