#pragma once
// The dispatcher's settings, shared by the launcher and the node processes, and the limiter
// policy they imply.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "redlimit/redlimit.hpp"

/// What the user chose on the command line.
struct DispatchSettings {
  int nodes = 3;
  std::int64_t messages = 8000;
  int rate = 400;  ///< the provider's limit, messages per second
  std::string algorithm = "gcra";
  double margin = 0.02;  ///< the limiter runs at rate x (1 - margin)
  bool no_limit = false;
  /// ClientOptions::replicas: admissions are answered once this many replicas hold them.
  int replicas = 0;
  bool local = false;
  std::string redis_url;  ///< empty: start a private redis-server
  std::string tls_ca;     ///< a rediss:// URL's CA file (TlsOptions::ca_file); empty: the system's
};

/// The rate the limiter enforces: below the provider's, by the margin, so that the small
/// differences between when Redis admits a message and when it reaches the provider never add
/// up to one message too many in the provider's trailing second.
std::int64_t limiter_rate(const DispatchSettings& settings);

/// How late after its slot a permit may still be used (AcquireOptions::max_lateness): half of
/// what the margin leaves spare goes to permits used late, the other half to the way to the
/// provider. A permit answered later (a failover held the answer) is not used, so that late
/// answers never reach the provider in a bunch. No limit when the margin leaves nothing spare.
std::chrono::microseconds max_lateness(const DispatchSettings& settings);

/// The policy every node applies to the key "provider": the chosen algorithm at
/// limiter_rate() per second, with no burst (one permit at a time) and, for the leaky bucket,
/// room for every sender of every node in its queue. Throws redlimit::InvalidArgument for an
/// unknown algorithm.
redlimit::Policy dispatch_policy(const DispatchSettings& settings);

/// The algorithm names --algorithm accepts.
std::vector<std::string> algorithm_names();

/// The messages node `index` (0-based) of `nodes` sends when `messages` are shared out.
std::int64_t messages_for_node(std::int64_t messages, int nodes, int index);
