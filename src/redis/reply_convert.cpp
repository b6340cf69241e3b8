#include "redis/reply_convert.hpp"

#include "redlimit/errors.hpp"

namespace redlimit::detail {

std::string error_code(std::string_view message) {
  const auto space = message.find(' ');
  return std::string(message.substr(0, space));
}

bool is_permission_error(std::string_view message) {
  const std::string code = error_code(message);
  return code == "NOPERM" || code == "NOAUTH" || code == "WRONGPASS" ||
         message.find("The user executing the script can't") != std::string_view::npos;
}

std::exception_ptr exception_from_error(std::string_view message, std::string_view hint) {
  if (is_permission_error(message)) {
    std::string text = "Redis refused for lack of permission: " + std::string(message);
    if (!hint.empty()) text += " (" + std::string(hint) + ")";
    return std::make_exception_ptr(ConfigError(text));
  }
  return std::make_exception_ptr(ReplyError(error_code(message), std::string(message)));
}

}  // namespace redlimit::detail
