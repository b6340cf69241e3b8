#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "redis/connection.hpp"
#include "redlimit/task.hpp"

namespace redlimit::detail {

/// Picks the connection that serves a hash slot. Today one node serves every slot; a Redis
/// Cluster router keeps a slot map and one connection per primary.
class SlotRouter {
 public:
  virtual ~SlotRouter() = default;
  /// The connection for `slot`, or any connection for a command without a key.
  virtual Connection& route(std::optional<std::uint16_t> slot) = 0;
  /// Closes every connection.
  virtual Task<void> close() = 0;
};

/// Every slot on one server.
class SingleNodeRouter final : public SlotRouter {
 public:
  explicit SingleNodeRouter(std::unique_ptr<Connection> connection)
      : connection_(std::move(connection)) {}
  Connection& route(std::optional<std::uint16_t>) override { return *connection_; }
  Task<void> close() override { return connection_->close(); }

 private:
  std::unique_ptr<Connection> connection_;
};

}  // namespace redlimit::detail
