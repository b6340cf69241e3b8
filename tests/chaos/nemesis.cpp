#include "chaos/nemesis.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <random>
#include <stdexcept>
#include <thread>

#include "chaos/call_log.hpp"
#include "support/acl_line.hpp"

namespace redlimit::chaos {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

/// The length range of each kind, in ms; instant faults have length 0.
std::pair<int, int> length_range(FaultKind kind) {
  switch (kind) {
    case FaultKind::stop:
    case FaultKind::restart:
      return {300, 1500};
    case FaultKind::pause_write:
    case FaultKind::pause_all:
    case FaultKind::debug_sleep:
      return {200, 1000};
    case FaultKind::oom:
    case FaultKind::maxclients:
      return {500, 1500};
    case FaultKind::acl_subscribe:
      return {1000, 2000};
    case FaultKind::replica_stall:
      return {200, 1500};
    case FaultKind::script_flush:
    case FaultKind::worker_kill:
    case FaultKind::failover:
    case FaultKind::primary_kill:
      return {0, 0};
  }
  return {0, 0};
}

/// What a fault takes beyond its length, as planned: the burst before a worker_kill; the
/// sentinels' promotion (a kill waits for their 5 s down-after) and the new replica's sync.
milliseconds planned_settling(FaultKind kind) {
  switch (kind) {
    case FaultKind::worker_kill:
      return 150ms;
    case FaultKind::failover:
      return 3000ms;
    case FaultKind::primary_kill:
      return 9000ms;
    default:
      return 0ms;
  }
}

long long info_field(const Reply& reply, const std::string& field) {
  const std::string& text = reply.str;
  const auto at = text.find(field + ":");
  if (at == std::string::npos) throw std::runtime_error("INFO without " + field);
  return std::stoll(text.substr(at + field.size() + 1));
}

struct RawConnection {
  explicit RawConnection(int port, std::atomic<long long>& own) {
    ++own;
    context = redisConnectWithTimeout("127.0.0.1", port, timeval{1, 0});
  }
  ~RawConnection() {
    if (context != nullptr) redisFree(context);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;
  /// True if the command got a reply that is not an error.
  bool ok(const char* command) {
    if (context == nullptr || context->err != 0) return false;
    auto* reply = static_cast<redisReply*>(redisCommand(context, command));
    const bool good = reply != nullptr && reply->type != REDIS_REPLY_ERROR;
    if (reply != nullptr) freeReplyObject(reply);
    return good;
  }
  redisContext* context;
};

}  // namespace

std::string_view to_string(FaultKind kind) {
  switch (kind) {
    case FaultKind::stop:
      return "stop";
    case FaultKind::restart:
      return "restart";
    case FaultKind::script_flush:
      return "script_flush";
    case FaultKind::pause_write:
      return "pause_write";
    case FaultKind::pause_all:
      return "pause_all";
    case FaultKind::debug_sleep:
      return "debug_sleep";
    case FaultKind::oom:
      return "oom";
    case FaultKind::maxclients:
      return "maxclients";
    case FaultKind::acl_subscribe:
      return "acl_subscribe";
    case FaultKind::worker_kill:
      return "worker_kill";
    case FaultKind::failover:
      return "failover";
    case FaultKind::primary_kill:
      return "primary_kill";
    case FaultKind::replica_stall:
      return "replica_stall";
  }
  return "?";
}

std::vector<Fault> make_schedule(std::uint64_t seed, milliseconds run_length, int fleet_size,
                                 std::span<const FaultKind> kinds) {
  std::mt19937_64 random(seed);
  auto uniform = [&random](int low, int high) {
    return std::uniform_int_distribution<int>(low, high)(random);
  };
  std::vector<Fault> schedule;
  milliseconds planned = warmup;
  for (;;) {
    std::vector<FaultKind> round(kinds.begin(), kinds.end());
    std::shuffle(round.begin(), round.end(), random);
    for (FaultKind kind : round) {
      const auto [low, high] = length_range(kind);
      Fault fault{kind, milliseconds(uniform(low, high)), min_gap + milliseconds(uniform(0, 1500)),
                  -1};
      if (kind == FaultKind::worker_kill) fault.victim = uniform(0, fleet_size - 1);
      const milliseconds takes = fault.length + fault.gap + planned_settling(kind);
      if (planned + takes > run_length) return schedule;
      planned += takes;
      schedule.push_back(fault);
    }
  }
}

Reply Nemesis::admin(const std::vector<std::string>& argv) {
  ++own_connections_;
  return redis_.command(argv);
}

FaultRun Nemesis::inject(const Fault& fault, std::vector<Restart>& restarts) {
  FaultRun run{fault.kind, monotonic_ns(), 0, fault.victim};
  const std::string ms = std::to_string(fault.length.count());
  switch (fault.kind) {
    case FaultKind::stop:
      redis_.pause();
      std::this_thread::sleep_for(fault.length);
      redis_.resume();
      break;
    case FaultKind::restart:
      redis_.kill();
      restarts.push_back({wall_us()});
      std::this_thread::sleep_for(fault.length);
      redis_.start();
      break;
    case FaultKind::script_flush:
      admin({"SCRIPT", "FLUSH"});
      break;
    case FaultKind::pause_write:
    case FaultKind::pause_all:
      admin({"CLIENT", "PAUSE", ms, fault.kind == FaultKind::pause_write ? "WRITE" : "ALL"});
      std::this_thread::sleep_for(fault.length);
      break;
    case FaultKind::debug_sleep:
      admin({"DEBUG", "SLEEP", std::to_string(static_cast<double>(fault.length.count()) / 1000)});
      break;
    case FaultKind::oom:
      fill_memory(fault.length);
      break;
    case FaultKind::maxclients:
      fill_maxclients(fault.length);
      break;
    case FaultKind::acl_subscribe:
      admin({"ACL", "SETUSER", "redlimit", "-subscribe"});
      admin({"CLIENT", "KILL", "USER", "redlimit"});
      std::this_thread::sleep_for(fault.length);
      admin({"ACL", "SETUSER", "redlimit", "+subscribe"});
      break;
    case FaultKind::worker_kill:
      fleet_.kill_in_burst(fault.victim);
      break;
    case FaultKind::failover:
    case FaultKind::primary_kill:
    case FaultKind::replica_stall:
      throw std::logic_error("a fault of a replicated deployment, on one server");
  }
  run.end_ns = monotonic_ns();
  return run;
}

void Nemesis::fill_memory(milliseconds length) {
  const long long used = info_field(admin({"INFO", "memory"}), "used_memory");
  admin({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  admin({"CONFIG", "SET", "maxmemory", std::to_string(used + (1 << 20))});
  admin({"SET", "chaos-filler", std::string(4 << 20, 'x')});
  std::this_thread::sleep_for(length);
  admin({"DEL", "chaos-filler"});
  admin({"CONFIG", "SET", "maxmemory", "0"});
}

void Nemesis::fill_maxclients(milliseconds length) {
  RawConnection control(redis_.port(), own_connections_);
  if (!control.ok("CONFIG SET maxclients 4")) throw std::runtime_error("CONFIG SET maxclients");
  control.ok("CLIENT KILL USER redlimit");
  std::vector<std::unique_ptr<RawConnection>> fillers;
  for (int i = 0; i < 16; ++i) {
    auto filler = std::make_unique<RawConnection>(redis_.port(), own_connections_);
    if (!filler->ok("PING")) break;
    fillers.push_back(std::move(filler));
  }
  std::this_thread::sleep_for(length);
  control.ok("CONFIG SET maxclients 10000");
}

}  // namespace redlimit::chaos
