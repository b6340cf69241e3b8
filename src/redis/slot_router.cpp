#include "redis/slot_router.hpp"

#include <array>
#include <string_view>

#include "redis/reply_convert.hpp"

namespace redlimit::detail {

Task<void> SingleNodeRouter::connect(Clock::time_point deadline) {
  static constexpr std::array<std::string_view, 1> ping = {"PING"};
  CommandResult result = co_await connection_->send(ping, deadline);
  if (result.reply.type == Reply::Type::error) {
    std::rethrow_exception(exception_from_error(result.reply.str));
  }
}

}  // namespace redlimit::detail
