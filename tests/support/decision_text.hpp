#pragma once
// A decision as one line of text, for the differential tests' failure messages and comparisons.

#include <sstream>
#include <string>

#include "redlimit/limit.hpp"

namespace redlimit::test {

/// Every field a script and the model must agree on, e.g. "{allowed 1, limit 10, ...}".
inline std::string describe(const Decision& d) {
  std::ostringstream out;
  out << "{allowed " << d.allowed << ", limit " << d.limit << ", remaining " << d.remaining
      << ", retry " << d.retry_after.count() << ", reset " << d.reset_after.count() << ", now "
      << d.server_time_us << ", binding " << d.binding << "}";
  return out.str();
}

}  // namespace redlimit::test
