#include "redis/cluster_replies.hpp"

#include <charconv>

#include "redis/key_slot.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

template <class Number>
std::optional<Number> parse_number(std::string_view text) {
  Number value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

/// "host:port" (the port after the last ':', so IPv6 hosts work).
std::optional<NodeAddress> parse_address(std::string_view text, std::string_view asked_host) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto port = parse_number<int>(text.substr(colon + 1));
  if (!port || *port <= 0 || *port > 65535) return std::nullopt;
  std::string_view host = text.substr(0, colon);
  if (host.empty()) host = asked_host;
  return NodeAddress{std::string(host), *port};
}

}  // namespace

std::string NodeAddress::display() const {
  return (host.find(':') == std::string::npos ? host : "[" + host + "]") + ":" +
         std::to_string(port);
}

std::optional<Redirect> parse_redirect(std::string_view message, std::string_view asked_host) {
  Redirect redirect;
  if (message.starts_with("MOVED ")) {
    redirect.kind = Redirect::Kind::moved;
  } else if (message.starts_with("ASK ")) {
    redirect.kind = Redirect::Kind::ask;
  } else {
    return std::nullopt;
  }
  message.remove_prefix(message.find(' ') + 1);
  const auto space = message.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const auto slot = parse_number<std::uint16_t>(message.substr(0, space));
  auto target = parse_address(message.substr(space + 1), asked_host);
  if (!slot || *slot >= slot_count || !target) return std::nullopt;
  redirect.slot = *slot;
  redirect.target = std::move(*target);
  return redirect;
}

std::vector<SlotRange> parse_cluster_slots(const Reply& reply, std::string_view asked_host) {
  auto bad = [](const std::string& why) -> ProtocolError {
    return ProtocolError("unexpected CLUSTER SLOTS reply: " + why);
  };
  if (reply.type != Reply::Type::array) throw bad("not an array");
  std::vector<SlotRange> ranges;
  for (const Reply& entry : reply.elements) {
    if (entry.type != Reply::Type::array || entry.elements.size() < 3) {
      throw bad("a range without a primary");
    }
    const Reply& first = entry.elements[0];
    const Reply& last = entry.elements[1];
    const Reply& node = entry.elements[2];
    if (first.type != Reply::Type::integer || last.type != Reply::Type::integer ||
        first.integer < 0 || last.integer < first.integer || last.integer >= slot_count) {
      throw bad("a range with bad slot numbers");
    }
    if (node.type != Reply::Type::array || node.elements.size() < 2 ||
        (node.elements[0].type != Reply::Type::string && !node.elements[0].is_nil()) ||
        node.elements[1].type != Reply::Type::integer) {
      throw bad("a node without host and port");
    }
    std::string host = node.elements[0].str;
    // Why nil and "?": a node whose endpoint is unknown is announced so (nil with
    // cluster-preferred-endpoint-type unknown-endpoint, "?" with hostname and none set); like
    // an empty host, it means the node we asked, at the port given.
    if (host.empty() || host == "?") host = std::string(asked_host);
    ranges.push_back({static_cast<std::uint16_t>(first.integer),
                      static_cast<std::uint16_t>(last.integer),
                      NodeAddress{std::move(host), static_cast<int>(node.elements[1].integer)}});
  }
  return ranges;
}

}  // namespace redlimit::detail
