#include "redis/cluster_router.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <set>
#include <string_view>

#include "redis/reply_convert.hpp"
#include "redis/script_registry.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"

namespace redlimit::detail {
namespace {

NodeAddress address_of(const Endpoint& endpoint) {
  return {endpoint.host, endpoint.port};
}

Task<void> close_connection(Connection* connection) {
  co_await connection->close();
}

}  // namespace

ClusterRouter::ClusterRouter(uv_loop_t* loop, BackgroundTasks& tasks, std::vector<Endpoint> seeds,
                             ConnectionSettings settings, std::chrono::milliseconds command_timeout,
                             std::shared_ptr<spdlog::logger> logger)
    : loop_(loop),
      tasks_(tasks),
      seeds_(std::move(seeds)),
      settings_(settings),
      command_timeout_(command_timeout),
      logger_(std::move(logger)) {}

Connection& ClusterRouter::node(const NodeAddress& address) {
  const std::string key = address.display();
  if (const auto found = nodes_.find(key); found != nodes_.end()) return *found->second;
  // Why: a connection made after close() began would never be closed; any closed one fails
  // the command as a closed client should.
  if (closing_ && !nodes_.empty()) return *nodes_.begin()->second;
  Endpoint endpoint = seeds_.front();
  endpoint.host = address.host;
  endpoint.port = address.port;
  auto connection = std::make_unique<Connection>(loop_, std::move(endpoint), settings_, logger_);
  return *nodes_.emplace(key, std::move(connection)).first->second;
}

Connection* ClusterRouter::live_seed() {
  for (const Endpoint& seed : seeds_) {
    const NodeAddress address = address_of(seed);
    const auto found = nodes_.find(address.display());
    if (found == nodes_.end() || !found->second->known_down()) return &node(address);
  }
  return nullptr;
}

Connection& ClusterRouter::seed_to_ask() {
  Connection* live = live_seed();
  return live != nullptr ? *live : node(address_of(seeds_.front()));
}

Connection& ClusterRouter::route(std::optional<std::uint16_t> slot) {
  if (!map_known_) {
    suspect_topology();
    return seed_to_ask();
  }
  if (slot) {
    if (Connection* owner = owner_[*slot]) return *owner;
    suspect_topology();  // a slot nobody serves: it may have been assigned since
  }
  return nodes_.empty() ? node(address_of(seeds_.front())) : *nodes_.begin()->second;
}

NextTry ClusterRouter::next_try(const TryOutcome& outcome, std::optional<std::uint16_t> slot,
                                Hops& hops) {
  // Why: a connection closed because its node left the slot map fails what it had not sent
  // yet (and answers NOSCRIPT without a reload); the node that serves the slot now can take it.
  const Reply* reply = outcome.reply;
  if (retired(outcome.target) &&
      (outcome.unsent || (reply != nullptr && ScriptRegistry::is_noscript(*reply)))) {
    if (++hops.redirects > max_redirects) return {};
    return {.kind = NextTry::Kind::resend, .target = &route(slot)};
  }
  if (reply == nullptr) {
    suspect_topology();
    // Why only unsent, and only a seed: a seed that could not be reached did not run the
    // command, and while the map is unread the next seed may serve it (or redirect it); a node
    // a redirect named is not the server whose breaker guards the command.
    if (map_known_ || !outcome.unsent || hops.redirected || closing_) return {};
    Connection* next = live_seed();
    if (next == nullptr || next == &outcome.target || ++hops.redirects > max_redirects) return {};
    return {.kind = NextTry::Kind::resend, .target = next, .from_failed_server = true};
  }
  if (reply->type != Reply::Type::error) return {};
  if (classify_error_reply(reply->str) != ErrorReplyKind::redirect) {
    return pause_if_not_now(*reply, hops);
  }
  const auto redirect = parse_redirect(reply->str, outcome.target.endpoint().host);
  Connection* next = redirect ? follow(*redirect) : nullptr;
  if (next == nullptr) return {};
  if (++hops.redirects > max_redirects) {
    // Why a pause: nodes that send a call to each other disagree for a moment on who serves
    // the slot (a failover or a move half told); the slot map read meanwhile may settle it.
    suspect_topology();
    return pause(hops);
  }
  hops.redirected = true;
  return {.kind = NextTry::Kind::resend,
          .target = next,
          .asking = redirect->kind == Redirect::Kind::ask};
}

Connection* ClusterRouter::follow(const Redirect& redirect) {
  Connection& target = node(redirect.target);
  if (redirect.kind == Redirect::Kind::moved) {
    owner_[redirect.slot] = &target;
    // Why: slots move in batches (resharding, failover); learn the rest in one read.
    suspect_topology();
  }
  return &target;
}

void ClusterRouter::suspect_topology() {
  if (closing_ || background_refreshing_) return;
  const auto now = Clock::now();
  if (last_refresh_ != Clock::time_point{} && now - last_refresh_ < refresh_interval) return;
  last_refresh_ = now;
  background_refreshing_ = true;
  tasks_.start_upkeep(background_refresh());
}

Task<void> ClusterRouter::background_refresh() {
  ++refreshes_running_;
  const bool refreshed =
      co_await refresh_noting_errors(Clock::now() + settings_.connect_timeout + command_timeout_);
  background_refreshing_ = false;
  if (!refreshed && !closing_) logger_->debug("redis cluster: no node answered CLUSTER SLOTS");
  refresh_finished();
}

Task<bool> ClusterRouter::refresh_noting_errors(Clock::time_point deadline) {
  try {
    co_return co_await refresh(deadline);
  } catch (const ConfigError&) {
    config_error_ = std::current_exception();
  }
  co_return false;
}

void ClusterRouter::refresh_finished() {
  if (--refreshes_running_ > 0 || !refreshes_done_) return;
  // Why a local: setting it resumes close(), after which this router may be gone.
  const std::unique_ptr<Completion> done = std::move(refreshes_done_);
  done->set();
}

Task<bool> ClusterRouter::refresh(Clock::time_point deadline) {
  std::vector<NodeAddress> candidates;
  std::set<std::string> listed;
  for (const auto& [key, connection] : nodes_) {
    if (listed.insert(key).second) candidates.push_back(address_of(connection->endpoint()));
  }
  for (const Endpoint& seed : seeds_) {
    NodeAddress address = address_of(seed);
    if (listed.insert(address.display()).second) candidates.push_back(std::move(address));
  }
  static constexpr std::array<std::string_view, 2> cluster_slots = {"CLUSTER", "SLOTS"};
  std::string not_a_cluster;  // a node that answered so, for when no node gives a map
  for (const NodeAddress& address : candidates) {
    const auto now = Clock::now();
    if (closing_ || now >= deadline) co_return false;
    Connection& connection = node(address);
    CommandResult result;
    try {
      result = co_await connection.send(cluster_slots, std::min(deadline, now + command_timeout_));
    } catch (const Error& e) {
      logger_->debug("redis cluster: CLUSTER SLOTS from {} failed: {}", address.display(),
                     e.what());
      continue;
    }
    // Why here: close() may have begun while we waited, and apply() would change what it walks.
    if (closing_) co_return false;
    if (result.reply.type == Reply::Type::error) {
      if (result.reply.str.find("cluster support disabled") != std::string::npos) {
        not_a_cluster = address.display() + " (" + result.reply.str + ")";
        continue;
      }
      logger_->debug("redis cluster: CLUSTER SLOTS from {}: {}", address.display(),
                     result.reply.str);
      continue;
    }
    std::vector<SlotRange> ranges;
    try {
      ranges = parse_cluster_slots(result.reply, address.host);
    } catch (const ProtocolError& e) {
      logger_->warn("redis cluster: {} from {}", e.what(), address.display());
      continue;
    }
    if (ranges.empty()) continue;  // a node that has not joined a cluster yet
    apply(ranges);
    co_return true;
  }
  if (!not_a_cluster.empty()) {
    throw ConfigError("redis-cluster:// names a server that is not a cluster node: " +
                      not_a_cluster + "; use a redis:// URL for it");
  }
  co_return false;
}

void ClusterRouter::apply(const std::vector<SlotRange>& ranges) {
  owner_.fill(nullptr);
  for (const SlotRange& range : ranges) {
    Connection& primary = node(range.primary);
    std::fill(owner_.begin() + range.first, owner_.begin() + range.last + 1, &primary);
  }
  if (!map_known_) logger_->debug("redis cluster: slot map loaded ({} ranges)", ranges.size());
  map_known_ = true;
  retire_unused();
}

void ClusterRouter::retire_unused() {
  retired_.remove_if([](const std::unique_ptr<Connection>& c) { return c->closed(); });
  const std::set<const Connection*> serving(owner_.begin(), owner_.end());
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    if (serving.contains(it->second.get())) {
      ++it;
      continue;
    }
    tasks_.start_upkeep(close_connection(it->second.get()));
    retired_.push_back(std::move(it->second));
    it = nodes_.erase(it);
  }
}

Task<void> ClusterRouter::connect(Clock::time_point deadline) {
  last_refresh_ = Clock::now();
  ++refreshes_running_;
  const bool refreshed = co_await refresh_noting_errors(deadline);
  const std::exception_ptr config_error = config_error_;
  std::string seeds;
  for (const Endpoint& seed : seeds_)
    seeds += (seeds.empty() ? "" : ", ") + seed.display();
  refresh_finished();  // last use of this router: a close() waiting for us may go on
  if (config_error) std::rethrow_exception(config_error);
  if (!refreshed) {
    throw ConnectionError("redis cluster: no node answered CLUSTER SLOTS in time (seeds: " + seeds +
                          ")");
  }
}

Task<void> ClusterRouter::close() {
  if (nodes_.empty()) node(address_of(seeds_.front()));
  closing_ = true;
  if (refreshes_running_ > 0) {
    refreshes_done_ = std::make_unique<Completion>();
    co_await refreshes_done_->wait();
  }
  // Why a snapshot: a list is safe to walk across suspensions whatever happens to the maps.
  std::vector<Connection*> connections;
  for (auto& [key, connection] : nodes_)
    connections.push_back(connection.get());
  for (auto& connection : retired_)
    connections.push_back(connection.get());
  for (Connection* connection : connections)
    co_await connection->close();
}

}  // namespace redlimit::detail
