#include "support/sentinel_group.hpp"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "support/child_process.hpp"

namespace redlimit::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* master_name = "mymaster";

/// The TLS settings of a node or sentinel of a TLS group, in redis-server's words.
std::vector<std::string> tls_settings(const TestCertificates& certificates) {
  return {"tls-cert-file",    certificates.server.cert,
          "tls-key-file",     certificates.server.key,
          "tls-ca-cert-file", certificates.ca,
          "tls-auth-clients", "no",
          "tls-replication",  "yes"};
}

}  // namespace

std::string role_of(RedisServer& node) {
  try {
    const Reply role = node.command({"ROLE"});
    if (role.type == Reply::Type::array && !role.elements.empty()) {
      return role.elements.front().str;
    }
  } catch (const std::exception&) {
  }
  return "";
}

std::vector<std::string> SentinelGroup::data_node_args(int port) const {
  // Why no diskless-sync delay: a replica's first sync (and a demoted primary's, after a
  // failover) would otherwise wait 5 s for more replicas, and WAIT counts none meanwhile.
  std::vector<std::string> args = {"--repl-diskless-sync-delay", "0"};
  if (!options_.password.empty()) {
    args.insert(args.end(),
                {"--requirepass", options_.password, "--masterauth", options_.password});
  }
  if (certificates_) {
    args.insert(args.end(), {"--port", "0", "--tls-port", std::to_string(port)});
    const std::vector<std::string> settings = tls_settings(*certificates_);
    for (std::size_t i = 0; i + 1 < settings.size(); i += 2)
      args.insert(args.end(), {"--" + settings[i], settings[i + 1]});
  }
  return args;
}

SentinelGroup::SentinelGroup(Options options) : options_(std::move(options)) {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "redlimit-sentinel-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = pattern;
  if (options_.tls) certificates_ = std::make_unique<TestCertificates>(dir_);
  // Why chosen here: a TLS node's clients use a port of its own, which RedisServer does not know.
  const int primary_port = options_.tls ? free_port() : 0;
  nodes_.push_back(std::make_unique<RedisServer>(data_node_args(primary_port)));
  node_ports_.push_back(options_.tls ? primary_port : nodes_[0]->port());
  const int replica_port = options_.tls ? free_port() : 0;
  std::vector<std::string> replica_args = data_node_args(replica_port);
  replica_args.insert(replica_args.end(),
                      {"--replicaof", "127.0.0.1", std::to_string(node_ports_[0])});
  nodes_.push_back(std::make_unique<RedisServer>(replica_args));
  node_ports_.push_back(options_.tls ? replica_port : nodes_[1]->port());
  sentinels_.resize(3);
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    Sentinel& sentinel = sentinels_[i];
    sentinel.port = free_port();
    std::string config = "port " + std::to_string(sentinel.port) +
                         "\nbind 127.0.0.1\ndaemonize no\ndir " + dir_ + "\nlogfile " + dir_ +
                         "/sentinel-" + std::to_string(i) + ".log\n" + "sentinel monitor " +
                         master_name + " 127.0.0.1 " + std::to_string(node_ports_[0]) +
                         " 2\nsentinel down-after-milliseconds " + master_name +
                         " 5000\nsentinel failover-timeout " + master_name +
                         " 10000\nsentinel parallel-syncs " + master_name + " 1\n";
    if (!options_.password.empty()) {
      config += std::string("sentinel auth-pass ") + master_name + " " + options_.password + "\n";
    }
    if (!options_.sentinel_password.empty()) {
      config += "requirepass " + options_.sentinel_password + "\n";
    }
    if (certificates_) {
      sentinel.tls_port = free_port();
      config += "tls-port " + std::to_string(sentinel.tls_port) + "\n";
      const std::vector<std::string> settings = tls_settings(*certificates_);
      for (std::size_t s = 0; s + 1 < settings.size(); s += 2)
        config += settings[s] + " " + settings[s + 1] + "\n";
    }
    start_sentinel(sentinel, config);
  }
  wait_until_monitoring();
}

SentinelGroup::~SentinelGroup() {
  for (Sentinel& sentinel : sentinels_) {
    if (sentinel.pid < 0) continue;
    ::kill(sentinel.pid, SIGKILL);
    waitpid(sentinel.pid, nullptr, 0);
  }
  nodes_.clear();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void SentinelGroup::start_sentinel(Sentinel& sentinel, const std::string& config) {
  const std::string path = dir_ + "/sentinel-" + std::to_string(sentinel.port) + ".conf";
  std::ofstream(path) << config;
  sentinel.pid = start_server_process({redis_server_binary(), path, "--sentinel"});
}

void SentinelGroup::wait_until_monitoring() const {
  const auto give_up = Clock::now() + 30s;
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    for (;;) {
      bool ready = false;
      try {
        const Reply replicas = sentinel_command(i, {"SENTINEL", "replicas", master_name});
        const Reply others = sentinel_command(i, {"SENTINEL", "sentinels", master_name});
        bool replica_up = false;
        for (const Reply& replica : replicas.elements) {
          // Each is a flat list of field, value.
          for (std::size_t f = 0; f + 1 < replica.elements.size(); f += 2) {
            if (replica.elements[f].str == "flags" && replica.elements[f + 1].str == "slave") {
              replica_up = true;
            }
          }
        }
        ready = replica_up && others.elements.size() >= sentinels_.size() - 1;
      } catch (const std::exception&) {
      }
      if (ready) break;
      if (Clock::now() > give_up) {
        throw std::runtime_error("sentinel " + std::to_string(i) +
                                 " did not see the replica and the other sentinels within 30 s; "
                                 "see " +
                                 dir_);
      }
      std::this_thread::sleep_for(50ms);
    }
  }
}

std::string SentinelGroup::url() const {
  std::string url = certificates_ ? "rediss-sentinel://" : "redis-sentinel://";
  if (!options_.password.empty()) url += options_.password + "@";
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    if (i > 0) url += ",";
    url +=
        "127.0.0.1:" + std::to_string(certificates_ ? sentinels_[i].tls_port : sentinels_[i].port);
  }
  return url + "#" + master_name;
}

Reply SentinelGroup::sentinel_command(std::size_t index,
                                      const std::vector<std::string>& argv) const {
  return tcp_command(sentinels_.at(index).port, options_.sentinel_password, argv);
}

int SentinelGroup::primary_port_by_sentinels() const {
  const Reply address = sentinel_command(0, {"SENTINEL", "get-master-addr-by-name", master_name});
  if (address.type != Reply::Type::array || address.elements.size() != 2) {
    throw std::runtime_error("sentinel 0 names no primary");
  }
  return std::stoi(address.elements[1].str);
}

RedisServer& SentinelGroup::primary() {
  for (const auto& node : nodes_)
    if (role_of(*node) == "master") return *node;
  throw std::runtime_error("no data node is a primary");
}

RedisServer& SentinelGroup::replica() {
  for (const auto& node : nodes_)
    if (role_of(*node) == "slave") return *node;
  throw std::runtime_error("no data node is a replica");
}

int SentinelGroup::failover() {
  const int before = primary_port_by_sentinels();
  const auto give_up = Clock::now() + 20s;
  // Why retried: until the sentinel has seen the replica catch up, it answers NOGOODSLAVE.
  for (;;) {
    const Reply asked = sentinel_command(0, {"SENTINEL", "failover", master_name});
    if (asked.type != Reply::Type::error) break;
    if (Clock::now() > give_up) throw std::runtime_error("SENTINEL FAILOVER: " + asked.str);
    std::this_thread::sleep_for(100ms);
  }
  for (;;) {
    const int now = primary_port_by_sentinels();
    if (now != before) {
      for (std::size_t n = 0; n < nodes_.size(); ++n) {
        if (node_ports_[n] == now && role_of(*nodes_[n]) == "master") return now;
      }
    }
    if (Clock::now() > give_up) throw std::runtime_error("the failover did not finish in 20 s");
    std::this_thread::sleep_for(20ms);
  }
}

RedisServer& SentinelGroup::node_on(int port) {
  for (std::size_t n = 0; n < nodes_.size(); ++n)
    if (node_ports_[n] == port) return *nodes_[n];
  throw std::runtime_error("no data node on port " + std::to_string(port));
}

int SentinelGroup::failover_and_rejoin() {
  RedisServer& old_primary = primary();
  const int new_port = failover();
  old_primary.command({"REPLICAOF", "127.0.0.1", std::to_string(new_port)});
  return new_port;
}

int SentinelGroup::kill_primary_and_rejoin() {
  const int old_port = primary_port_by_sentinels();
  RedisServer& old_primary = node_on(old_port);
  old_primary.kill();
  const auto give_up = Clock::now() + 60s;
  int new_port = old_port;
  while ((new_port = primary_port_by_sentinels()) == old_port) {
    if (Clock::now() > give_up) throw std::runtime_error("the sentinels promoted no replica");
    std::this_thread::sleep_for(50ms);
  }
  old_primary.start();
  old_primary.command({"REPLICAOF", "127.0.0.1", std::to_string(new_port)});
  return new_port;
}

void SentinelGroup::wait_until_replicated(std::chrono::seconds timeout) {
  const auto give_up = Clock::now() + timeout;
  for (;;) {
    try {
      // Why a write first, on the same connection: WAIT counts the replicas that acknowledged
      // its connection's last write, so with none it counts a replica in its full sync too.
      const Reply acknowledged =
          primary().commands({{"INCR", "redlimit-test:replication-probe"}, {"WAIT", "1", "100"}});
      if (acknowledged.integer >= 1) return;
    } catch (const std::exception&) {
      // no primary yet, or it is loading: asked again
    }
    if (Clock::now() > give_up) throw std::runtime_error("no replica holds the primary's writes");
    std::this_thread::sleep_for(50ms);
  }
}

}  // namespace redlimit::test
