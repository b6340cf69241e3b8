#pragma once

#include <exception>
#include <string>

#include "limiter/backend.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

/// A follower could not confirm its stored policy with the server it talks to now: the client's
/// contact with Redis broke since the policy was read (the server may have restarted without
/// it), and reading it again failed. A decision is then the failure policy's answer under the
/// policy read last (`request`), never one asked of Redis under it; other calls fail with this
/// ConnectionError.
class UnconfirmedPolicy : public ConnectionError {
 public:
  UnconfirmedPolicy(DecideRequest request, const std::string& why)
      : ConnectionError(
            "the stored policy could not be read again since the connection to Redis "
            "ended: " +
            why),
        request_(std::move(request)) {}
  /// The call's request under the policy read last: what the failure policy answers for.
  const DecideRequest& request() const noexcept { return request_; }

 private:
  DecideRequest request_;
};

}  // namespace redlimit::detail
