#pragma once

#include <exception>

namespace redlimit::detail {

/// Whether `error` means Redis could not answer in time, so that a failure policy applies: no
/// connection, timeouts, overload, and the replies of a server that is busy, loading,
/// read-only, out of memory or without its cluster. Anything else (bad arguments, permissions,
/// protocol errors) is raised to the caller.
bool is_unavailability(const std::exception_ptr& error);

}  // namespace redlimit::detail
