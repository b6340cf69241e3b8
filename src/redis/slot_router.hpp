#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <vector>

#include "redis/cluster_replies.hpp"
#include "redis/connection.hpp"
#include "redlimit/task.hpp"

namespace redlimit::detail {

class EndpointSource;

/// Picks the connection that serves a hash slot: one server for every slot, or a Redis Cluster
/// slot map with one connection per primary.
class SlotRouter {
 public:
  using Clock = Connection::Clock;

  virtual ~SlotRouter() = default;
  /// The connection for `slot`, or any connection for a command without a key. No I/O.
  virtual Connection& route(std::optional<std::uint16_t> slot) = 0;
  /// True for a cluster: redirects are followed and cluster errors retried.
  virtual bool is_cluster() const noexcept = 0;
  /// Where a MOVED or ASK reply sends the command (MOVED also updates the slot map); null when
  /// redirects are not followed.
  virtual Connection* follow(const Redirect& redirect) = 0;
  /// The slot map may be stale (a lost connection, READONLY, CLUSTERDOWN): refresh it soon.
  virtual void suspect_topology() = 0;
  /// Establishes what routing needs by `deadline`: a connection, and for a cluster the slot map.
  virtual Task<void> connect(Clock::time_point deadline) = 0;
  /// Closes every connection.
  virtual Task<void> close() = 0;
  /// The servers a pub/sub connection may use, in order of preference.
  virtual std::vector<Endpoint> subscriber_endpoints() const = 0;
  /// A configuration error found while routing (a cluster seed that is no cluster node), which
  /// every call then fails with; null if none.
  virtual std::exception_ptr config_error() const noexcept { return nullptr; }
  /// Where the pub/sub connection finds its server, when it is found rather than given (a
  /// Sentinel's primary); null otherwise.
  virtual EndpointSource* endpoint_source() noexcept { return nullptr; }
};

/// Every slot on one server.
class SingleNodeRouter final : public SlotRouter {
 public:
  explicit SingleNodeRouter(std::unique_ptr<Connection> connection)
      : connection_(std::move(connection)) {}
  Connection& route(std::optional<std::uint16_t>) override { return *connection_; }
  bool is_cluster() const noexcept override { return false; }
  Connection* follow(const Redirect&) override { return nullptr; }
  void suspect_topology() override {}
  Task<void> connect(Clock::time_point deadline) override;
  Task<void> close() override { return connection_->close(); }
  std::vector<Endpoint> subscriber_endpoints() const override { return {connection_->endpoint()}; }

 private:
  std::unique_ptr<Connection> connection_;
};

}  // namespace redlimit::detail
