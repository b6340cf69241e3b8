#include "redis/reply_convert.hpp"

#include "redlimit/errors.hpp"

namespace redlimit::detail {

std::string error_code(std::string_view message) {
  const auto space = message.find(' ');
  return std::string(message.substr(0, space));
}

ErrorReplyKind classify_error_reply(std::string_view message) {
  const std::string_view code = message.substr(0, message.find(' '));
  if (code == "MOVED" || code == "ASK") return ErrorReplyKind::redirect;
  if (code == "TRYAGAIN" || code == "CLUSTERDOWN" || code == "LOADING" || code == "MASTERDOWN") {
    return ErrorReplyKind::retry_soon;
  }
  // Why the text too: Redis 6.2 reports a script's write on a replica inside an ERR.
  if (code == "READONLY" || message.find("READONLY You can't write against a read only replica") !=
                                std::string_view::npos) {
    return ErrorReplyKind::stale_primary;
  }
  if (code == "BUSY" || code == "OOM" || code == "NOREPLICAS" ||
      message.starts_with("ERR max number of clients reached")) {
    return ErrorReplyKind::server_busy;
  }
  if (code == "NOSCRIPT") return ErrorReplyKind::script_missing;
  // Why two texts: a script's refused command is an ERR, in Redis's words or in Valkey's.
  if (code == "NOPERM" || code == "NOAUTH" || code == "WRONGPASS" ||
      message.find("The user executing the script can't") != std::string_view::npos ||
      message.find("ACL failure in script") != std::string_view::npos) {
    return ErrorReplyKind::permission;
  }
  return ErrorReplyKind::other;
}

bool is_permission_error(std::string_view message) {
  return classify_error_reply(message) == ErrorReplyKind::permission;
}

std::exception_ptr exception_from_error(std::string_view message, std::string_view hint) {
  if (is_permission_error(message)) {
    std::string text = "Redis refused for lack of permission: " + std::string(message);
    if (!hint.empty()) text += " (" + std::string(hint) + ")";
    return std::make_exception_ptr(ConfigError(text));
  }
  return std::make_exception_ptr(ReplyError(error_code(message), std::string(message)));
}

bool means_unavailable(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Unavailable&) {
    return true;
  } catch (const ReplyError& e) {
    // Why a redirect too: a call that ends on one never reached the node that serves its slot.
    const ErrorReplyKind kind = classify_error_reply(e.what());
    return is_transient(kind) || kind == ErrorReplyKind::redirect;
  } catch (...) {
    return false;
  }
}

std::string describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace redlimit::detail
