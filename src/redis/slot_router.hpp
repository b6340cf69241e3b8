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

/// How far one command went through its router's answers.
struct Hops {
  /// MOVED, ASK, and moves off a connection whose node left the slot map, since the last pause
  int redirects = 0;
  int retries = 0;  ///< pauses before trying again
  /// It went where a MOVED or ASK sent it.
  bool redirected = false;
};

/// How one try of a command on one connection ended.
struct TryOutcome {
  Connection& target;
  const Reply* reply;  ///< null when it failed with a ConnectionError
  bool unsent;         ///< it failed before the command left (so it did not run)
};

/// What a command does after a try, as its router says.
struct NextTry {
  enum class Kind {
    answer,  ///< the outcome is the command's
    resend,  ///< send it again at once, to `target` (after ASKING when `asking`)
    retry,   ///< after `delay`, routed again (when that is before the command's deadline)
  };
  Kind kind = Kind::answer;
  Connection* target = nullptr;
  bool asking = false;
  /// With resend: the try failed at its server, whose circuit breaker counts the failure; the
  /// breaker of `target`'s server guards the call from now on.
  bool from_failed_server = false;
  std::chrono::milliseconds delay{};
};

/// Picks the connection that serves a hash slot: one server for every slot, or a Redis Cluster
/// slot map with one connection per primary; and says what a command does with what a server
/// answered (a redirect, "not now").
class SlotRouter {
 public:
  using Clock = Connection::Clock;

  /// Most redirects one command follows in a row (MOVED and ASK together); after as many, it
  /// pauses, the slot map is read again, and it is routed afresh.
  static constexpr int max_redirects = 5;

  virtual ~SlotRouter() = default;
  /// The connection for `slot`, or any connection for a command without a key. No I/O.
  virtual Connection& route(std::optional<std::uint16_t> slot) = 0;
  /// True for a cluster: the keys of one command must share a hash slot.
  virtual bool is_cluster() const noexcept = 0;
  /// The connection of the node that serves `slot` as far as the slot map says, or null when it
  /// does not say (not read yet, or nobody serves the slot); the same for every slot on one
  /// server. No I/O, and no refresh asked for: commands whose slots have one owner can be sent
  /// to it together.
  virtual const Connection* owner(std::uint16_t slot) const noexcept = 0;
  /// What a command for `slot` does after `outcome` (`hops` counts what it did so far). A failed
  /// try suspects the topology.
  virtual NextTry next_try(const TryOutcome& outcome, std::optional<std::uint16_t> slot,
                           Hops& hops) = 0;
  /// Whether `connection` was closed because its node left the slot map (not because the
  /// client closes): what it did not run, another node can.
  virtual bool retired(const Connection&) const noexcept { return false; }
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

 protected:
  /// For an error `reply` that says "not now" (TRYAGAIN, CLUSTERDOWN, LOADING, MASTERDOWN,
  /// READONLY, BUSY): try again after a pause, suspecting the topology unless it is TRYAGAIN (a
  /// slot migrating) or BUSY (a script running), which do not change it. Any other reply is the
  /// answer.
  NextTry pause_if_not_now(const Reply& reply, Hops& hops);
  /// Try again after a pause (longer after each), routed afresh.
  NextTry pause(Hops& hops);
};

/// Every slot on one server.
class SingleNodeRouter final : public SlotRouter {
 public:
  explicit SingleNodeRouter(std::unique_ptr<Connection> connection)
      : connection_(std::move(connection)) {}
  Connection& route(std::optional<std::uint16_t>) override { return *connection_; }
  bool is_cluster() const noexcept override { return false; }
  const Connection* owner(std::uint16_t) const noexcept override { return connection_.get(); }
  /// An error reply that says "not now" (LOADING, BUSY...) is tried again after a pause, within
  /// the deadline; every other outcome is the answer: one server has nothing else to try.
  NextTry next_try(const TryOutcome& outcome, std::optional<std::uint16_t> slot,
                   Hops& hops) override;
  void suspect_topology() override {}
  Task<void> connect(Clock::time_point deadline) override;
  Task<void> close() override { return connection_->close(); }
  std::vector<Endpoint> subscriber_endpoints() const override { return {connection_->endpoint()}; }

 private:
  std::unique_ptr<Connection> connection_;
};

}  // namespace redlimit::detail
