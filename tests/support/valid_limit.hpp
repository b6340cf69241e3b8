#pragma once
// Random limits the limiter accepts, for the differential tests.

#include "policy/compiled_policy.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::test {

/// The first limit `draw()` returns that the limiter accepts (CompiledPolicy::compile does not
/// refuse it with InvalidArgument): limits drawn at random until one is valid.
template <typename Draw>
Limit first_valid_limit(Draw draw) {
  for (;;) {
    Limit limit = draw();
    try {
      detail::CompiledPolicy::compile(Policy::of(limit));
      return limit;
    } catch (const InvalidArgument&) {
    }
  }
}

}  // namespace redlimit::test
