#pragma once

#include <span>
#include <string_view>

#include "redis/script_source.hpp"
#include "redlimit/reply.hpp"

namespace redlimit::detail {

/// Whether the call of `script` with `args` that got `reply` wrote anything whose loss in a
/// failover could admit or grant more than the limit allows: what CommandDispatcher holds
/// until the replicas have it (ClientOptions::replicas). False only for replies known to write
/// nothing that matters: a denied decision or reservation (a denial may rewrite a state in a
/// new policy's terms, or give back permits of dead owners: lost, they only under-admit), a
/// policy's stale refusal, a peek, a reservation's locate, a lease or renewal not granted, a
/// policy read, and an error (a semaphore's release always writes: it removes permits, or
/// voids the lease). Any other reply, of any other script, counts as a write.
bool reply_wrote(const scripts::ScriptSource& script, std::span<const std::string_view> args,
                 const Reply& reply);

}  // namespace redlimit::detail
