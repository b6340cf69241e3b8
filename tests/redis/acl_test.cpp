// The least-privilege Redis user of docs/operations.md: the whole API works when logged in as
// that user, its ACL allows exactly the commands the library sends, and anything else is
// refused with a ConfigError that carries Redis's NOPERM.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "lua_scripts.hpp"
#include "policy/compiled_policy.hpp"
#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/policy_store.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/semaphore.hpp"
#include "redlimit/task_group.hpp"
#include "support/acl_line.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

using test::acl_change_rules;
using test::acl_follow_rules;
using test::acl_setuser;

/// What the client sends by itself: PING (connection handshake), EVALSHA, and EVAL after a
/// NOSCRIPT, DEL (reset, in lua/reset.lua), SUBSCRIBE and UNSUBSCRIBE (cancellation and release
/// notices). AUTH needs no permission; SELECT is sent only for a database other than 0.
// Why pttl: Limiter::inspect() reads each key's TTL.
const std::set<std::string> client_commands = {"ping",      "evalsha",     "eval", "del",
                                               "subscribe", "unsubscribe", "pttl"};

using test::words;

/// The commands the ACL line allows ("+zadd" -> "zadd").
std::vector<std::string> allowed_commands() {
  std::vector<std::string> out;
  for (const std::string& word : words(acl_setuser))
    if (word.front() == '+') out.push_back(word.substr(1));
  return out;
}

Policy one(Algorithm algorithm, Rate rate, std::int64_t burst = 0,
           Window window = Window::aligned) {
  return Policy::of(Limit{algorithm, rate, burst, window});
}

// Why factories: g++ 12 cannot compile some braced initializers inside coroutine bodies.
std::unique_ptr<Limiter> limiter(Client& client, Policy policy, std::string name) {
  return std::make_unique<Limiter>(client, std::move(policy),
                                   LimiterOptions{.name = std::move(name)});
}

/// The message of the ConfigError `task` fails with, or what happened instead.
template <class T>
std::string config_error_of(uv_loop_t* loop, Task<T> task) {
  try {
    run(loop, std::move(task));
  } catch (const ConfigError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a ConfigError: ") + e.what();
  }
  return "no error";
}

// ---- the whole API, in pieces

/// How one waiting acquire() ended.
struct Waited {
  std::optional<Decision> decision;
  std::string cancelled;  // the Cancelled message
  Clock::time_point at;
};

// Why a token and not AcquireOptions: the options refer to their token, which must outlive
// them; a coroutine parameter keeps the token itself.
Task<void> wait_for(Limiter& limiter, std::stop_token stop, Waited* out) {
  try {
    out->decision = co_await limiter.acquire("key", 1, {.stop = stop});
  } catch (const Cancelled& e) {
    out->cancelled = e.what();
  }
  out->at = Clock::now();
}

/// try_acquire, a denial, peek and reset on one key of every algorithm.
Task<void> every_algorithm(Client& client) {
  for (const Algorithm algorithm :
       {Algorithm::gcra, Algorithm::token_bucket, Algorithm::leaky_bucket, Algorithm::fixed_window,
        Algorithm::sliding_window_log, Algorithm::sliding_window_counter}) {
    const std::string name(to_string(algorithm));
    // Anchored: a window that starts at the first request cannot end between these calls.
    auto l = limiter(client, one(algorithm, {3, 24h}, 0, Window::anchored), name);
    const Decision all = co_await l->try_acquire("user", 3);
    EXPECT_TRUE(all.allowed) << name;
    const Decision more = co_await l->try_acquire("user");
    EXPECT_FALSE(more.allowed) << name;
    const Decision peeked = co_await l->peek("user");
    EXPECT_EQ(peeked.remaining, 0) << name;
    co_await l->reset("user");
    const Decision fresh = co_await l->try_acquire("user", 3);
    EXPECT_TRUE(fresh.allowed) << name << " after reset()";
  }
}

/// acquire() waits: by reservation on the bucket algorithms, by asking again on a window.
Task<void> waiting(Client& client) {
  for (const Algorithm algorithm :
       {Algorithm::gcra, Algorithm::token_bucket, Algorithm::leaky_bucket}) {
    const std::string name(to_string(algorithm));
    // 20/s: a permit every 50 ms. The leaky bucket queues the waiter only with room for two.
    auto l = limiter(client, one(algorithm, {20, 1s}, algorithm == Algorithm::leaky_bucket ? 2 : 1),
                     "wait-" + name);
    const Decision took = co_await l->try_acquire("key");
    const Decision waited = co_await l->acquire("key");
    EXPECT_TRUE(waited.allowed) << name;
    // Why in Redis time: the wait counts from the call, which a busy machine may start well
    // after the take (even after the slot, when the call is admitted at once).
    EXPECT_GE(waited.server_time_us - took.server_time_us, 50'000)
        << name << ": not before its slot";
  }
  auto window = limiter(client, one(Algorithm::fixed_window, {1, 100ms}), "wait-window");
  co_await window->try_acquire("key");
  const Decision next = co_await window->acquire("key");
  EXPECT_TRUE(next.allowed);
}

/// A cancelled waiter gives its reservation back, and its notice moves the waiter behind it.
Task<void> cancellation(Client& client, uv_loop_t* loop) {
  auto l = limiter(client, one(Algorithm::gcra, {5, 1s}, 1), "queue");  // a slot every 200 ms
  const Decision burst = co_await l->try_acquire("key");
  std::stop_source stop_first;
  Waited first, second;
  TaskGroup group;
  group.add(wait_for(*l, stop_first.get_token(), &first));  // slot 200 ms
  group.add(wait_for(*l, {}, &second));                     // slot 400 ms
  co_await sleep_for(loop, 50ms);
  stop_first.request_stop();
  co_await group.join();
  EXPECT_THAT(first.cancelled, HasSubstr("given back"));
  EXPECT_TRUE(second.decision && second.decision->allowed);
  // Why Redis times: the second's slot is 400 ms after the burst's, or 200 ms once moved,
  // however late a busy machine runs the waiters.
  if (second.decision) {
    EXPECT_LT(second.decision->server_time_us - burst.server_time_us, 400'000)
        << "the cancellation moved the second to the first's slot, 200 ms after the burst";
  }
}

/// Cancellations pile up in the key's log; a later one prunes the entries whose backlog ended
/// over a second before (the only path that runs ZREMRANGEBYRANK).
Task<void> cancel_log_pruning(Client& client, uv_loop_t* loop) {
  auto l = limiter(client, one(Algorithm::gcra, {10, 1s}, 1), "log");  // a slot every 100 ms
  const auto start = Clock::now();
  co_await l->try_acquire("key");
  std::stop_source stop2, stop5, stop6;
  Waited w1, w2, w3, w4, w5, w6;
  TaskGroup group;
  group.add(wait_for(*l, {}, &w1));                 // slot 100
  group.add(wait_for(*l, stop2.get_token(), &w2));  // slot 200
  co_await sleep_for(loop, 5ms);
  stop2.request_stop();  // logged; its backlog ends at 300
  co_await sleep_for(loop, 5ms);
  group.add(wait_for(*l, {}, &w3));                 // slot 200
  group.add(wait_for(*l, {}, &w4));                 // slot 300
  group.add(wait_for(*l, stop5.get_token(), &w5));  // slot 400
  co_await sleep_for(loop, 5ms);
  stop5.request_stop();  // logged; its backlog ends at 500, so the log lives until 1,500
  const auto until_1350 =
      std::chrono::ceil<std::chrono::microseconds>(1350ms - (Clock::now() - start));
  if (until_1350 > 0us) co_await sleep_for(loop, until_1350);
  co_await l->try_acquire("key");                   // the key's permit again
  group.add(wait_for(*l, stop6.get_token(), &w6));  // slot 1,450
  co_await sleep_for(loop, 10ms);
  stop6.request_stop();  // finds the entry of 300 stale: pruned
  co_await group.join();
  for (const Waited* cancelled : {&w2, &w5, &w6})
    EXPECT_THAT(cancelled->cancelled, HasSubstr("given back"));
}

/// The reserve script called as the library calls it, for the gcra limit 5/s, burst 1.
std::vector<std::string> reserve_call(std::string operation, std::string last, std::string lease) {
  const auto policy = detail::CompiledPolicy::compile(one(Algorithm::gcra, {5, 1s}, 1));
  const std::string key = "rl:{lapsed:key}" + policy->limits().front().key_suffix;
  const auto& epoch = policy->epoch_fields();
  const auto& limit = policy->limits().front().fields;
  return {"EVALSHA",
          std::string(detail::scripts::reserve.sha1),
          "4",
          key,
          key + ":cancels",
          key + ":leases",
          key + ":held",
          std::move(operation),
          "1",
          "",
          epoch[0],
          epoch[1],
          epoch[2],
          limit[0],
          limit[1],
          limit[2],
          limit[3],
          std::move(last),
          std::move(lease)};
}

/// A reservation's owner lease lapses (its owner never renews it) and the next call on the key
/// gives it back: the only path that reads the reservations held (HGET).
Task<void> lapsed_lease(Client& client, uv_loop_t* loop) {
  std::vector<std::string> first = reserve_call("reserve", "0", "1");
  co_await client.command(std::move(first));
  std::vector<std::string> waiting = reserve_call("reserve", "1000000", "1");  // a 1 us lease
  const Reply reserved = co_await client.command(std::move(waiting));
  EXPECT_GT(reserved.as_array().at(12).as_integer(), 0) << "registered under a lease";
  co_await sleep_for(loop, 2ms);
  std::vector<std::string> renew = reserve_call("renew", "2", "1000");
  const Reply renewed = co_await client.command(std::move(renew));
  EXPECT_EQ(renewed.as_array().at(0).as_integer(), 0) << "reclaimed before the renewal";
}

Task<void> wait_for_lease(Semaphore& semaphore, Clock::time_point* granted_at) {
  Lease lease = co_await semaphore.acquire("tenant");
  *granted_at = Clock::now();
  co_await lease.release();
}

/// A lease is taken, renewed and released; the release notice wakes a waiter.
Task<void> semaphore_leases(Client& client, uv_loop_t* loop) {
  auto exports = std::make_unique<Semaphore>(client, 1, "exports", 2s);
  std::optional<Lease> lease = co_await exports->try_acquire("tenant");
  EXPECT_TRUE(lease.has_value());
  if (!lease) co_return;
  co_await lease->renew();
  Clock::time_point granted_at;
  TaskGroup group;
  group.add(wait_for_lease(*exports, &granted_at));  // refused for now: waits
  co_await sleep_for(loop, 50ms);
  const auto released_at = Clock::now();
  std::exception_ptr failed;
  try {
    co_await lease->release();
  } catch (...) {
    failed = std::current_exception();
  }
  // Why join first: the waiter uses this frame. It gets the permit at the lease's expiry at
  // the latest.
  co_await group.join();
  if (failed) std::rethrow_exception(failed);
  // Without the notice the waiter would ask again only 1 to 1.25 s after its refusal, which came
  // before the release.
  EXPECT_LT(granted_at - released_at, 900ms) << "the release notice woke the waiter";
}

// ---- the fixture

/// A private redis-server with the documented user, and a client logged in as that user.
class Acl : public test::LoopTest {
 protected:
  void SetUp() override { EXPECT_EQ(server_.command(words(acl_setuser)).str, "OK"); }
  void TearDown() override {
    run(loop(), client_.close());
    for (const std::string& key : server_.keys())
      EXPECT_TRUE(key.starts_with("rl:")) << "a key outside the prefix: " << key;
    for (const std::string& key : server_.keys_without_ttl()) {
      // Stored policies are configuration: they have no TTL (docs/operations.md).
      EXPECT_TRUE(key.starts_with("rl:policy:{")) << "a key without TTL was left: " << key;
    }
    LoopTest::TearDown();
  }

  ClientOptions as_user(std::string_view database = "") const {
    return ClientOptions{.url = "redis://redlimit:change-me@127.0.0.1:" +
                                std::to_string(server_.port()) + std::string(database),
                         .command_timeout = 2s,  // generous: sanitizer builds
                         .reservation_lease = 6s,
                         .stats_interval = 1s};  // the fleet's counts, which need +hincrby
  }
  /// "<reason> <object>" of the newest ACL LOG entry (e.g. "command flushall"), or "".
  std::string newest_acl_denial() const {
    const Reply log = server_.command({"ACL", "LOG", "1"});
    if (log.type != Reply::Type::array || log.elements.empty()) return "";
    std::map<std::string, std::string> entry;
    const auto& fields = log.elements.front().elements;
    for (std::size_t i = 0; i + 1 < fields.size(); i += 2)
      entry[fields[i].str] = fields[i + 1].str;
    return entry["reason"] + " " + entry["object"];
  }

  test::RedisServer server_;
  Client client_{loop(), as_user()};
};

// ---- the user can do everything the library does

TEST_F(Acl, LeastPrivilegeUserRunsEveryAlgorithmWaitsCancelsAndHoldsLeases) {
  run(loop(), every_algorithm(client_));
  run(loop(), waiting(client_));
  run(loop(), cancellation(client_, loop()));
  run(loop(), cancel_log_pruning(client_, loop()));
  run(loop(), lapsed_lease(client_, loop()));
  run(loop(), semaphore_leases(client_, loop()));
  // Why closed first: close() sends the last of the fleet's decision counts (fleet_counts.lua).
  run(loop(), client_.close());
  EXPECT_EQ(newest_acl_denial(), "") << "Redis denied something";
  // INFO commandstats counts the commands scripts call too: every permission was used.
  for (const std::string& command : allowed_commands())
    EXPECT_GT(server_.command_calls(command), 0) << command << " was never called";
}

/// The commands `script` calls, in lower case.
std::set<std::string> commands_of(const detail::scripts::ScriptSource& script) {
  std::set<std::string> out;
  for (std::string command : words(script.commands)) {
    std::ranges::transform(command, command.begin(),
                           [](unsigned char c) { return std::tolower(c); });
    out.insert(command);
  }
  return out;
}

TEST(AclLine, AllowsExactlyTheCommandsTheClientSendsAndTheScriptsCall) {
  std::set<std::string> needed = client_commands;
  for (const auto* script : detail::scripts::all) {
    if (script != &detail::scripts::policy_store) needed.merge(commands_of(*script));
  }
  const std::vector<std::string> allowed = allowed_commands();
  EXPECT_EQ(std::set<std::string>(allowed.begin(), allowed.end()), needed);
  EXPECT_EQ(needed.size(), allowed.size()) << "a command is listed twice";
}

TEST(AclLine, FollowingAndChangingPoliciesAddExactlyThePolicyStoresCommands) {
  const std::vector<std::string> base = allowed_commands();
  std::set<std::string> allowed(base.begin(), base.end());
  for (const std::string_view rules : {acl_follow_rules, acl_change_rules}) {
    for (const std::string& word : words(rules)) {
      EXPECT_TRUE(allowed.insert(word.substr(1)).second) << word << " is listed twice";
    }
  }
  std::set<std::string> store = commands_of(detail::scripts::policy_store);
  for (const std::string& command : base)
    store.insert(command);
  EXPECT_EQ(allowed, store);
}

TEST(AclLine, IsQuotedVerbatimInTheOperationsGuide) {
  // __FILE__ is relative to the build directory, where meson test runs the tests.
  const std::filesystem::path source(__FILE__);
  if (!std::filesystem::exists(source)) GTEST_SKIP() << "not run from the build directory";
  std::ifstream guide(source.parent_path() / ".." / ".." / "docs" / "operations.md");
  bool quoted = false;
  for (std::string line; std::getline(guide, line);)
    quoted = quoted || line == acl_setuser;
  EXPECT_TRUE(quoted) << "docs/operations.md must quote this line on a line of its own:\n"
                      << acl_setuser;
}

// ---- and nothing more

Task<void> one_decision(Limiter& limiter) {
  co_await limiter.try_acquire("user");
}

TEST_F(Acl, KeysOutsideThePrefixAndOtherCommandsAreRefusedWithConfigError) {
  Limiter outside(client_, one(Algorithm::gcra, {10, 1s}),
                  LimiterOptions{.name = "api", .prefix = "app"});
  EXPECT_THAT(config_error_of(loop(), one_decision(outside)), HasSubstr("NOPERM"));
  EXPECT_EQ(newest_acl_denial(), "key app:{api:user}:gcra:0");

  EXPECT_THAT(config_error_of(loop(), client_.command("DEL", "session:42")), HasSubstr("NOPERM"));
  EXPECT_EQ(newest_acl_denial(), "key session:42");

  EXPECT_THAT(config_error_of(loop(), client_.command("FLUSHALL")), HasSubstr("NOPERM"));
  EXPECT_EQ(newest_acl_denial(), "command flushall");

  // EVAL runs any script, but the script's commands are checked against the same ACL (in
  // Redis's words, or Valkey's).
  EXPECT_THAT(
      config_error_of(loop(), client_.command("EVAL", "return redis.call('SET', 'x', 1)", "0")),
      ::testing::AnyOf(HasSubstr("can't"), HasSubstr("ACL failure in script")));
  EXPECT_EQ(newest_acl_denial(), "key x");
}

/// One decision of a limiter that follows the policy stored under "followed".
Task<void> followed_decision(Client& client) {
  Limiter follower(client, LimiterOptions{.name = "followed"});
  co_await follower.try_acquire("user");
}

TEST_F(Acl, FollowingAndAdvancingAStoreThatLostChangesNeedHgetallAndChangingPoliciesHexists) {
  Client admin(loop(), {.url = server_.url()});
  PolicyStore admin_store(admin);
  run(loop(), admin_store.set("followed", Policy{Limit::gcra("10/s")}));
  EXPECT_THAT(config_error_of(loop(), followed_decision(client_)), HasSubstr("lack of permission"));

  std::vector<std::string> follow = {"ACL", "SETUSER", "redlimit"};
  for (const std::string& rule : words(acl_follow_rules))
    follow.push_back(rule);
  EXPECT_EQ(server_.command(follow).str, "OK");
  EXPECT_NO_THROW(run(loop(), followed_decision(client_)));
  // A key stamped with a version the store lost: the follower's advance of the store needs no
  // more rules (`us:f:p:0:0:0:d:burst:pv:written`, pv ninth).
  const std::string state_key = "rl:{followed:user}:gcra:0";
  std::string stamp = server_.command({"GET", state_key}).str;
  std::size_t pv_start = 0;
  for (int field = 0; field < 8; ++field)
    pv_start = stamp.find(':', pv_start) + 1;
  stamp.replace(pv_start, stamp.find(':', pv_start) - pv_start, "100");
  server_.command({"SET", state_key, stamp, "KEEPTTL"});
  EXPECT_NO_THROW(run(loop(), followed_decision(client_)));
  EXPECT_GT(run(loop(), admin_store.record("followed"))->version, 100);
  PolicyStore store(client_);
  EXPECT_THAT(config_error_of(loop(), store.try_set("fresh", Policy{Limit::gcra("5/s")})),
              HasSubstr("lack of permission"));

  std::vector<std::string> change = {"ACL", "SETUSER", "redlimit"};
  for (const std::string& rule : words(acl_change_rules))
    change.push_back(rule);
  EXPECT_EQ(server_.command(change).str, "OK");
  EXPECT_NO_THROW(run(loop(), store.try_set("fresh", Policy{Limit::gcra("5/s")})));
  EXPECT_NO_THROW(run(loop(), store.set("followed", Policy{Limit::gcra("5/s")})));
  EXPECT_NO_THROW(run(loop(), store.set_override("followed", "vip", Policy{Limit::gcra("50/s")})));
  EXPECT_NO_THROW(run(loop(), store.remove_override("followed", "vip")));
  EXPECT_NO_THROW(run(loop(), store.remove("followed")));
  run(loop(), admin.close());
}

TEST_F(Acl, ADatabaseOtherThanZeroAlsoNeedsSelect) {
  Client in_db1(loop(), as_user("/1"));
  Limiter in_db1_limiter(in_db1, one(Algorithm::gcra, {10, 1s}), LimiterOptions{.name = "api"});
  EXPECT_THAT(config_error_of(loop(), one_decision(in_db1_limiter)), HasSubstr("'select'"));
  run(loop(), in_db1.close());

  EXPECT_EQ(server_.command({"ACL", "SETUSER", "redlimit", "+select"}).str, "OK");
  Client selecting(loop(), as_user("/1"));
  Limiter selecting_limiter(selecting, one(Algorithm::gcra, {10, 1s}),
                            LimiterOptions{.name = "api"});
  EXPECT_NO_THROW(run(loop(), one_decision(selecting_limiter)));
  run(loop(), selecting.close());
}

}  // namespace
}  // namespace redlimit
