#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/reply.hpp"

namespace redlimit::detail {

/// A node of a cluster, as its peers announce it.
struct NodeAddress {
  std::string host;
  int port = 0;

  bool operator==(const NodeAddress&) const = default;
  /// "host:port"
  std::string display() const;
};

/// A `MOVED <slot> <host>:<port>` or `ASK <slot> <host>:<port>` error reply.
struct Redirect {
  enum class Kind { moved, ask };
  Kind kind = Kind::moved;
  std::uint16_t slot = 0;
  NodeAddress target;
};

/// The redirect an error message asks for, if it is one. An empty host (a node that does not
/// know its own address) stands for `asked_host`, the host of the node that answered.
std::optional<Redirect> parse_redirect(std::string_view message, std::string_view asked_host);

/// One range of slots and the primary that serves it.
struct SlotRange {
  std::uint16_t first = 0;
  std::uint16_t last = 0;
  NodeAddress primary;
};

/// The ranges of a CLUSTER SLOTS reply. An empty host stands for `asked_host`. Throws
/// ProtocolError when the reply does not have the documented shape.
std::vector<SlotRange> parse_cluster_slots(const Reply& reply, std::string_view asked_host);

}  // namespace redlimit::detail
