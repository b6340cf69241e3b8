#include "support/redis_cluster.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <compare>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

namespace redlimit::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr long long all_slots = 16384;

/// One row of CLUSTER SLOTS: slots first..last are served by the node on `port`.
struct SlotRange {
  long long first = 0;
  long long last = 0;
  long long port = 0;
  auto operator<=>(const SlotRange&) const = default;
};

/// The slot map as `node` sees it, sorted by first slot.
std::vector<SlotRange> slot_map(const RedisServer& node) {
  const Reply reply = node.command({"CLUSTER", "SLOTS"});
  if (reply.type != Reply::Type::array) throw std::runtime_error("CLUSTER SLOTS: " + reply.str);
  std::vector<SlotRange> ranges;
  for (const Reply& row : reply.elements) {
    ranges.push_back({row.elements.at(0).integer, row.elements.at(1).integer,
                      row.elements.at(2).elements.at(1).integer});
  }
  std::sort(ranges.begin(), ranges.end());
  return ranges;
}

/// The value of `name` in INFO-style text ("name:value\r\n" lines), or "" if absent.
std::string info_field(const std::string& info, const std::string& name) {
  std::istringstream lines(info);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.starts_with(name + ":")) return line.substr(name.size() + 1);
  }
  return {};
}

/// "master" or "slave", by ROLE.
std::string role(const RedisServer& node) {
  return node.command({"ROLE"}).elements.at(0).str;
}

std::string describe(const RedisCluster& cluster, std::size_t i) {
  return "node " + std::to_string(i) + " (port " + std::to_string(cluster.node(i).port()) + ")";
}

std::vector<std::size_t> live_with_role(const RedisCluster& cluster, const std::string& wanted) {
  std::vector<std::size_t> found;
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    if (cluster.live(i) && role(cluster.node(i)) == wanted) found.push_back(i);
  }
  return found;
}

const RedisServer& any_live_node(const RedisCluster& cluster) {
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    if (cluster.live(i)) return cluster.node(i);
  }
  throw std::runtime_error("RedisCluster: no live node");
}

/// "first-last@port ..." of a slot map, for messages.
std::string to_text(const std::vector<SlotRange>& ranges) {
  std::string text;
  for (const SlotRange& range : ranges) {
    text += (text.empty() ? "" : " ") + std::to_string(range.first) + "-" +
            std::to_string(range.last) + "@" + std::to_string(range.port);
  }
  return text;
}

/// Why the cluster is not healthy (see wait_healthy()), or "" if it is.
std::string health_problem(const RedisCluster& cluster) {
  std::optional<std::vector<SlotRange>> shared;
  std::size_t first_live = 0;
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    if (!cluster.live(i)) continue;
    const RedisServer& node = cluster.node(i);
    const std::string info = node.command({"CLUSTER", "INFO"}).str;
    for (const auto& [field, expected] :
         {std::pair{"cluster_state", "ok"}, std::pair{"cluster_slots_ok", "16384"}}) {
      const std::string value = info_field(info, field);
      if (value != expected) return describe(cluster, i) + " says " + field + ":" + value;
    }
    std::vector<SlotRange> ranges = slot_map(node);
    if (!shared) {
      shared = std::move(ranges);
      first_live = i;
    } else if (ranges != *shared) {
      return describe(cluster, i) + " and " + describe(cluster, first_live) +
             " disagree about the slot map: " + to_text(ranges) + " against " + to_text(*shared);
    }
    if (const Reply roles = node.command({"ROLE"}); roles.elements.at(0).str == "slave") {
      // A link that is up does not mean writes flow: after a diskless sync the primary holds
      // them back until the replica's next REPLCONF ACK (up to 1 s). Offsets show it.
      const std::size_t primary =
          cluster.index_of_port(static_cast<int>(roles.elements.at(2).integer));
      if (!cluster.live(primary)) return describe(cluster, i) + " follows a node that is down";
      const long long written = std::stoll(info_field(
          cluster.node(primary).command({"INFO", "replication"}).str, "master_repl_offset"));
      const std::string replication = node.command({"INFO", "replication"}).str;
      const std::string link = info_field(replication, "master_link_status");
      if (link != "up") return describe(cluster, i) + " says master_link_status:" + link;
      if (std::stoll(info_field(replication, "slave_repl_offset")) < written) {
        return describe(cluster, i) + " lags behind its primary's offset " +
               std::to_string(written);
      }
    }
  }
  if (!shared) return "no live node";
  long long covered = 0;
  for (const SlotRange& range : *shared) {
    const std::size_t owner = cluster.index_of_port(static_cast<int>(range.port));
    if (!cluster.live(owner) || role(cluster.node(owner)) != "master") {
      return "slots " + std::to_string(range.first) + "-" + std::to_string(range.last) +
             " are served by " + describe(cluster, owner) + ", not a live primary";
    }
    covered += range.last - range.first + 1;
  }
  if (covered != all_slots) return std::to_string(covered) + " slots covered, not 16384";
  return {};
}

/// The last 2000 characters of the file at `path`, without the ANSI colours that
/// redis-cli --cluster writes even to a file.
std::string tail(const std::string& path) {
  std::ifstream file(path);
  std::ostringstream text;
  text << file.rdbuf();
  std::string all = text.str();
  for (auto at = all.find('\x1b'); at != std::string::npos; at = all.find('\x1b', at))
    all.erase(at, all.find('m', at) - at + 1);
  return all.size() > 2000 ? "..." + all.substr(all.size() - 2000) : all;
}

/// Starts one node; its cluster bus port is chosen here, since the default (port + 10000) may be
/// taken or past 65535.
std::unique_ptr<RedisServer> start_node(std::vector<std::string> args) {
  for (int attempt = 1;; ++attempt) {
    args.push_back("--cluster-port");
    args.push_back(std::to_string(free_port()));
    try {
      return std::make_unique<RedisServer>(args);
    } catch (const std::exception&) {
      if (attempt == 3) throw;
      args.resize(args.size() - 2);
    }
  }
}

}  // namespace

std::string redis_cli_binary() {
  const char* configured = std::getenv("REDIS_CLI");
  if (configured != nullptr && *configured != '\0') return configured;
  const std::filesystem::path server = redis_server_binary();
  if (server.has_parent_path()) {
    const std::filesystem::path beside = server.parent_path() / "redis-cli";
    if (access(beside.c_str(), X_OK) == 0) return beside.string();
  }
  return "redis-cli";
}

RedisCluster::RedisCluster(int primaries, int replicas_per_primary,
                           std::vector<std::string> extra_args)
    : primaries_at_creation_(primaries) {
  if (primaries < 3 || replicas_per_primary < 0) {
    throw std::invalid_argument("RedisCluster: needs >= 3 primaries and >= 0 replicas each");
  }
  bool has_masterauth = false;
  for (std::size_t i = 0; i + 1 < extra_args.size(); ++i) {
    if (extra_args[i] == "--requirepass") password_ = extra_args[i + 1];
    if (extra_args[i] == "--masterauth") has_masterauth = true;
  }
  // nodes.conf is relative to each node's own --dir. Replicas sync at once: by default a master
  // waits 5 s (repl-diskless-sync-delay) for more replicas before a diskless full sync.
  std::vector<std::string> args = {
      "--cluster-enabled",     "yes",        "--cluster-node-timeout",     "1000",
      "--cluster-config-file", "nodes.conf", "--repl-diskless-sync-delay", "0"};
  if (!password_.empty() && !has_masterauth) {
    args.insert(args.end(), {"--masterauth", password_});
  }
  args.insert(args.end(), extra_args.begin(), extra_args.end());

  std::string pattern =
      (std::filesystem::temp_directory_path() / "redlimit-cluster-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  log_dir_ = pattern;
  try {
    const int count = primaries * (1 + replicas_per_primary);
    std::vector<std::string> create = {"--cluster", "create"};
    for (int i = 0; i < count; ++i) {
      nodes_.push_back(start_node(args));
      create.push_back("127.0.0.1:" + std::to_string(nodes_.back()->port()));
    }
    create.insert(create.end(),
                  {"--cluster-replicas", std::to_string(replicas_per_primary), "--cluster-yes"});
    run_redis_cli(create, "create.log", 60s);
    for (const auto& node : nodes_)
      ids_.push_back(node->command({"CLUSTER", "MYID"}).str);
    wait_healthy();
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove_all(log_dir_, ignored);
    throw;
  }
}

RedisCluster::~RedisCluster() {
  nodes_.clear();  // Each RedisServer kills its process and removes its directory.
  std::error_code ignored;
  std::filesystem::remove_all(log_dir_, ignored);
}

std::string RedisCluster::url() const {
  std::string url = "redis-cluster://";
  for (int i = 0; i < primaries_at_creation_; ++i) {
    if (i > 0) url += ',';
    url += "127.0.0.1:" + std::to_string(nodes_.at(i)->port());
  }
  return url;
}

std::size_t RedisCluster::index_of_port(int port) const {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->port() == port) return i;
  }
  throw std::out_of_range("RedisCluster: no node on port " + std::to_string(port));
}

std::vector<std::size_t> RedisCluster::primaries() const {
  return live_with_role(*this, "master");
}

std::vector<std::size_t> RedisCluster::replicas() const {
  return live_with_role(*this, "slave");
}

std::size_t RedisCluster::primary_of_slot(int slot) const {
  for (const SlotRange& range : slot_map(any_live_node(*this))) {
    if (range.first <= slot && slot <= range.last) {
      return index_of_port(static_cast<int>(range.port));
    }
  }
  throw std::runtime_error("RedisCluster: slot " + std::to_string(slot) + " is not served");
}

std::vector<int> RedisCluster::slots_of(std::size_t i) const {
  std::vector<int> slots;
  for (const SlotRange& range : slot_map(any_live_node(*this))) {
    if (range.port != node(i).port()) continue;
    for (long long slot = range.first; slot <= range.last; ++slot)
      slots.push_back(static_cast<int>(slot));
  }
  return slots;
}

std::size_t RedisCluster::replica_of(std::size_t primary) const {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!live(i)) continue;
    const Reply reply = nodes_[i]->command({"ROLE"});
    if (reply.elements.at(0).str == "slave" &&
        reply.elements.at(2).integer == node(primary).port()) {
      return i;
    }
  }
  throw std::runtime_error("RedisCluster: " + describe(*this, primary) + " has no live replica");
}

void RedisCluster::failover(std::size_t replica, std::chrono::seconds timeout) {
  const Reply reply = node(replica).command({"CLUSTER", "FAILOVER"});
  if (reply.type == Reply::Type::error) {
    throw std::runtime_error("RedisCluster: CLUSTER FAILOVER to " + describe(*this, replica) +
                             ": " + reply.str);
  }
  const auto give_up = Clock::now() + timeout;
  while (role(node(replica)) != "master") {
    if (Clock::now() >= give_up) {
      throw std::runtime_error("RedisCluster: " + describe(*this, replica) + " is not a primary " +
                               std::to_string(timeout.count()) + " s after CLUSTER FAILOVER");
    }
    std::this_thread::sleep_for(20ms);
  }
}

void RedisCluster::wait_healthy(std::chrono::seconds timeout) const {
  const auto give_up = Clock::now() + timeout;
  for (;;) {
    std::string problem;
    try {
      problem = health_problem(*this);
    } catch (const std::exception& e) {
      problem = e.what();
    }
    if (problem.empty()) return;
    if (Clock::now() >= give_up) {
      throw std::runtime_error("RedisCluster: not healthy after " +
                               std::to_string(timeout.count()) + " s: " + problem);
    }
    std::this_thread::sleep_for(50ms);
  }
}

void RedisCluster::reshard(std::size_t from, std::size_t to, int slots) {
  if (slots < 1 || slots > all_slots) {
    throw std::invalid_argument("RedisCluster::reshard: slots must be in [1, 16384]");
  }
  // A slot takes about 3 ms on an idle machine, 10 ms on a busy one.
  const auto timeout = 60s + std::chrono::seconds(slots / 50);
  // redis-cli moves the source's lowest slots.
  std::vector<int> moving = slots_of(from);
  moving.resize(std::min(moving.size(), static_cast<std::size_t>(slots)));
  run_redis_cli({"--cluster", "reshard", "127.0.0.1:" + std::to_string(any_live_node(*this).port()),
                 "--cluster-from", node_id(from), "--cluster-to", node_id(to), "--cluster-slots",
                 std::to_string(slots), "--cluster-yes"},
                "reshard.log", timeout);
  confirm_owner(moving, to);
  wait_healthy();
}

RedisCluster::Migration RedisCluster::start_migrating(int slot) const {
  Migration migration{primary_of_slot(slot), primaries().front()};
  if (migration.to == migration.from) migration.to = primaries().back();
  const std::string slot_text = std::to_string(slot);
  auto set_slot = [&](std::size_t on, const char* state, std::size_t other) {
    const Reply reply = node(on).command({"CLUSTER", "SETSLOT", slot_text, state, node_id(other)});
    if (reply.str != "OK") {
      throw std::runtime_error("RedisCluster: " + describe(*this, on) + " refused SETSLOT " +
                               slot_text + " " + state + ": " + reply.str);
    }
  };
  set_slot(migration.to, "IMPORTING", migration.from);
  set_slot(migration.from, "MIGRATING", migration.to);
  return migration;
}

void RedisCluster::confirm_owner(const std::vector<int>& slots, std::size_t owner) const {
  // Why: redis-cli ends each slot's move by telling every primary its new owner, yet under load
  // a primary was seen here still claiming the last slot moved 30 s later (the other nodes
  // agreeing on the new owner). Telling it again is what an operator would do; a primary that
  // refuses (it still holds keys of the slot) is an error worth seeing.
  const int owner_port = node(owner).port();
  bool told = false;
  for (const std::size_t primary : primaries()) {
    const std::vector<SlotRange> view = slot_map(node(primary));
    for (const int slot : slots) {
      const auto range = std::find_if(view.begin(), view.end(), [slot](const SlotRange& r) {
        return r.first <= slot && slot <= r.last;
      });
      if (range != view.end() && range->port == owner_port) continue;
      const Reply reply = node(primary).command(
          {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", node_id(owner)});
      if (reply.type == Reply::Type::error) {
        throw std::runtime_error("RedisCluster: " + describe(*this, primary) + " refused slot " +
                                 std::to_string(slot) + " to " + describe(*this, owner) + ": " +
                                 reply.str);
      }
      told = true;
    }
  }
  // The owner's claim then outranks any stale one in the replicas' gossip.
  if (told) node(owner).command({"CLUSTER", "BUMPEPOCH"});
}

void RedisCluster::run_redis_cli(const std::vector<std::string>& args, const std::string& log_name,
                                 std::chrono::seconds timeout) const {
  std::vector<std::string> command = {redis_cli_binary()};
  if (!password_.empty()) command.insert(command.end(), {"-a", password_, "--no-auth-warning"});
  command.insert(command.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& arg : command)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::string text = "redis-cli";  // For messages; without the password.
  for (const auto& arg : args)
    text += " " + arg;
  const std::string log = log_dir_ + "/" + log_name;

  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) throw std::runtime_error("RedisCluster: fork failed");
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    const int null_fd = open("/dev/null", O_RDONLY);
    const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(null_fd, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  const auto give_up = Clock::now() + timeout;
  int status = 0;
  while (waitpid(child, &status, WNOHANG) == 0) {
    if (Clock::now() >= give_up) {
      ::kill(child, SIGKILL);
      waitpid(child, &status, 0);
      throw std::runtime_error("RedisCluster: `" + text + "` ran past " +
                               std::to_string(timeout.count()) + " s:\n" + tail(log));
    }
    std::this_thread::sleep_for(20ms);
  }
  if (!WIFEXITED(status)) {
    throw std::runtime_error("RedisCluster: `" + text + "` died of signal " +
                             std::to_string(WTERMSIG(status)) + ":\n" + tail(log));
  }
  if (WEXITSTATUS(status) != 0) {
    throw std::runtime_error("RedisCluster: `" + text + "` exited with " +
                             std::to_string(WEXITSTATUS(status)) + ":\n" + tail(log));
  }
}

}  // namespace redlimit::test
