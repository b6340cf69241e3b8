#pragma once

#include <stop_token>

namespace redlimit::detail {

/// A stop callback that requests a stop of `target`: a stop forwarded to the stop source a
/// waiter sleeps on (the caller's, or its client's close()).
struct ForwardStop {
  std::stop_source* target;
  void operator()() const noexcept { target->request_stop(); }
};

}  // namespace redlimit::detail
