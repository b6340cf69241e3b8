#pragma once

#include <exception>
#include <optional>

#include "redis/endpoint.hpp"

namespace redlimit::detail {

class Session;

/// Where a Session connects when its server is found rather than given: the primary that Redis
/// Sentinel names. A session given one asks it before every connection attempt, checks with
/// ROLE that the server it reached is a primary, and tells it when an attempt fails or an
/// established connection is lost. All on the loop's thread.
class EndpointSource {
 public:
  /// The server to connect to now; nullopt while it is not known (the session then waits for
  /// Session::endpoint_changed() or Session::endpoint_unknown()).
  virtual std::optional<Endpoint> current() = 0;
  /// An attempt to `endpoint` failed, or the connection to it was lost, or it is no primary:
  /// look again.
  virtual void trouble_with(const Endpoint& endpoint) = 0;
  /// Tells `session` of every change from now on (until forget()).
  virtual void watch(Session& session) = 0;
  virtual void forget(Session& session) = 0;

 protected:
  ~EndpointSource() = default;
};

}  // namespace redlimit::detail
