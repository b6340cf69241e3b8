// Coalesced script calls on a Redis Cluster: calls started in one loop turn on keys of many
// slots go as one batch per primary (per slot on a server that refuses scripts across slots),
// and every call is answered as if sent alone, in order on each key, also while its slot
// migrates or after it moved.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "limiter/batching_executor.hpp"
#include "limiter/redis_backend.hpp"
#include "lua_scripts.hpp"
#include "redis/key_slot.hpp"
#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/task_group.hpp"
#include "support/loop_test.hpp"
#include "support/redis_cluster.hpp"
#include "support/started_task.hpp"

namespace redlimit::detail {
namespace {

using namespace std::chrono_literals;

class BatchCluster : public test::LoopTest {
 protected:
  /// The cluster's URL, with timeouts a busy machine does not reach. Why: these tests check what
  /// every call answered, and 120 calls sent while the slot map and the connections are on their
  /// way missed the default 250 ms on a busy machine.
  ClientOptions patient_options() const {
    ClientOptions options;
    options.url = cluster_.url();
    options.connect_timeout = 5s;
    options.command_timeout = 5s;
    return options;
  }
  long long script_calls() const {
    long long calls = 0;
    for (const std::size_t primary : cluster_.primaries())
      calls += cluster_.node(primary).command_calls("evalsha") +
               cluster_.node(primary).command_calls("eval");
    return calls;
  }

  test::RedisCluster cluster_{3, 0};
};

TEST_F(BatchCluster, CallsOnKeysOfManySlotsInOneTurnAreEachAnsweredInOrderPerKey) {
  constexpr int keys = 30;
  constexpr int calls_per_key = 4;
  ClientOptions options = patient_options();
  options.reservation_lease = 0ms;  // no reclaim after a denial: one script call per decision
  options.max_batch = 64;
  Client client(loop(), options);
  RedisBackend backend(client.dispatcher());
  const auto policy = CompiledPolicy::compile(Policy::of(Limit::gcra(Rate{3, 1h})));
  // Why interleaved: the calls on one key are queued between calls on other slots.
  std::vector<std::string> answers(keys * calls_per_key);
  const long long before = script_calls();
  run(loop(), [&]() -> Task<void> {
    TaskGroup group;
    for (int call = 0; call < calls_per_key; ++call) {
      for (int key = 0; key < keys; ++key) {
        group.add([](RedisBackend& backend, std::shared_ptr<const CompiledPolicy> policy,
                     std::string key_base, std::string* out) -> Task<void> {
          const Decision decision = co_await backend.decide(
              DecideRequest(std::move(policy), KeyBase(key_base), Operation::acquire, 1));
          *out = decision.allowed ? "remaining " + std::to_string(decision.remaining) : "denied";
        }(backend, policy, "{user-" + std::to_string(key) + "}", &answers[call * keys + key]));
      }
    }
    co_await group.join();
  }());
  const long long calls = script_calls() - before;
  run(loop(), client.close());

  const char* const expected[] = {"remaining 2", "remaining 1", "remaining 0", "denied"};
  for (int call = 0; call < calls_per_key; ++call) {
    for (int key = 0; key < keys; ++key)
      EXPECT_EQ(answers[call * keys + key], expected[call]) << "key " << key << " call " << call;
  }
  EXPECT_LT(calls, keys * calls_per_key) << "the calls must go as batches";
  std::printf("[ batch cluster ] %d calls on %d keys as %lld script calls\n", keys * calls_per_key,
              keys, calls);
}

/// `count` key bases of distinct slots, "{<prefix>-<i>}".
std::vector<std::string> keys_of_distinct_slots(const std::string& prefix, int count) {
  std::vector<std::string> keys;
  std::vector<bool> taken(16384);
  for (int i = 0; static_cast<int>(keys.size()) < count; ++i) {
    std::string key = "{" + prefix + "-" + std::to_string(i) + "}";
    if (!taken[key_slot(key)]) {
      taken[key_slot(key)] = true;
      keys.push_back(std::move(key));
    }
  }
  return keys;
}

// Why: with a key per subject, each key has its own slot, and batches of one slot held one call
// each; a primary runs a script on keys of every slot it serves (Redis >= 7).
TEST_F(BatchCluster, CallsOnKeysOfManySlotsInOneTurnGoAsOneBatchPerPrimary) {
  constexpr int calls_per_key = 3;
  const std::vector<std::string> keys = keys_of_distinct_slots("spread", 60);
  ClientOptions options = patient_options();
  options.reservation_lease = 0ms;
  options.max_batch = 256;
  Client client(loop(), options);
  run(loop(), client.connect());  // the slot map: which primary serves which slot
  RedisBackend backend(client.dispatcher());
  const auto policy = CompiledPolicy::compile(Policy::of(Limit::gcra(Rate{3, 1h})));
  std::vector<std::string> answers(keys.size() * calls_per_key);
  const long long before = script_calls();
  run(loop(), [&]() -> Task<void> {
    TaskGroup group;
    for (int call = 0; call < calls_per_key; ++call) {
      for (std::size_t key = 0; key < keys.size(); ++key) {
        group.add([](RedisBackend& backend, std::shared_ptr<const CompiledPolicy> policy,
                     std::string key_base, std::string* out) -> Task<void> {
          const Decision decision = co_await backend.decide(
              DecideRequest(std::move(policy), KeyBase(key_base), Operation::acquire, 1));
          *out = decision.allowed ? "remaining " + std::to_string(decision.remaining) : "denied";
        }(backend, policy, keys[key], &answers[call * keys.size() + key]));
      }
    }
    co_await group.join();
  }());
  const long long calls = script_calls() - before;
  run(loop(), client.close());

  const char* const expected[] = {"remaining 2", "remaining 1", "remaining 0"};
  for (int call = 0; call < calls_per_key; ++call) {
    for (std::size_t key = 0; key < keys.size(); ++key) {
      EXPECT_EQ(answers[call * keys.size() + key], expected[call])
          << "key " << keys[key] << " call " << call;
    }
  }
  // 180 calls: one batch per primary.
  EXPECT_LE(calls, static_cast<long long>(cluster_.primaries().size()))
      << "the calls of each primary must go as one batch";
  std::printf("[ batch cluster ] %zu calls on %zu keys of distinct slots as %lld script calls\n",
              answers.size(), keys.size(), calls);
}

/// A decide_gcra call of one permit at an injected time (1 per ms, burst 10) through
/// `executor` on `key`; keeps its reply, or "error <what>", in `out`.
Task<void> gcra_into(ScriptExecutor& executor, std::string key, std::string* out) {
  const std::vector<std::string_view> keys{key};
  const std::vector<std::string_view> args{"1", "1000000000", "0", "0", "0", "1", "1000", "10"};
  try {
    const Reply reply =
        co_await executor.eval(scripts::decide_gcra, keys, args, ScriptExecutor::Clock::now() + 1s);
    *out = reply.as_string();
  } catch (const std::exception& error) {
    *out = std::string("error ") + error.what();
  }
}

// Why: Redis before 7 does not know script flags; it refuses the script across slots ("Error
// compiling script", as Redis 7 does for a shebang that is not the first line, which stands in
// for it here), and batches go per slot from then on, as before.
TEST_F(BatchCluster, AServerThatRefusesTheScriptAcrossSlotsKeepsBatchesPerSlot) {
  const std::string refused_source = "\n" + std::string(scripts::batch_across_slots.source);
  const scripts::ScriptSource refused{.name = "batch_across_slots",
                                      .source = refused_source,
                                      .sha1 = "0000000000000000000000000000000000000000",
                                      .commands = scripts::batch_across_slots.commands,
                                      .index = scripts::batch_across_slots.index};
  const std::vector<std::string> keys = keys_of_distinct_slots("old", 20);
  ClientOptions options = patient_options();
  options.max_batch = 1;  // the client's own calls alone: the one-by-one answers
  Client client(loop(), options);
  run(loop(), client.connect());
  BatchingExecutor executor(loop(), client.dispatcher(), 64, 2, &refused);
  // Two rounds of two calls per key, each round in one turn: batched, and one by one.
  constexpr int calls = 2;
  auto round = [&](ScriptExecutor& through, const std::string& prefix,
                   std::vector<std::string>& answers) {
    answers.assign(keys.size() * calls, "");
    run(loop(), [&]() -> Task<void> {
      TaskGroup group;
      for (int call = 0; call < calls; ++call) {
        for (std::size_t key = 0; key < keys.size(); ++key)
          group.add(gcra_into(through, prefix + keys[key], &answers[call * keys.size() + key]));
      }
      co_await group.join();
    }());
  };
  std::vector<std::string> first, second, alone_first, alone_second;
  round(executor, "batched:", first);
  const long long before_second = script_calls();
  round(executor, "batched:", second);
  const long long second_calls = script_calls() - before_second;
  round(client.dispatcher(), "alone:", alone_first);
  round(client.dispatcher(), "alone:", alone_second);
  run(loop(), executor.close());
  run(loop(), client.close());

  for (std::size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i], alone_first[i]) << "call " << i;
    EXPECT_EQ(second[i], alone_second[i]) << "call " << i;
  }
  EXPECT_EQ(first[0].rfind("error", 0), std::string::npos) << first[0];
  EXPECT_EQ(second_calls, static_cast<long long>(keys.size()))
      << "after the refusal, a batch per slot (two calls each)";
}

/// Runs a try_acquire of one permit on `key_base` and keeps "remaining <n>", "denied" or the
/// error in `out`.
Task<void> decide_into(RedisBackend& backend, std::shared_ptr<const CompiledPolicy> policy,
                       std::string key_base, std::string* out) {
  try {
    const Decision decision = co_await backend.decide(
        DecideRequest(std::move(policy), KeyBase(key_base), Operation::acquire, 1));
    *out = decision.allowed ? "remaining " + std::to_string(decision.remaining) : "denied";
  } catch (const std::exception& error) {
    *out = std::string("error ") + error.what();
  }
}

/// A batch on a slot that migrates: a key decided once before the migration starts (its state
/// stays on the slot's primary) and a key decided first during it (after ASK, on the importing
/// primary). A batch naming both is answered TRYAGAIN.
class MigratingSlot : public BatchCluster {
 protected:
  MigratingSlot() : client_(loop(), options()), backend_(client_.dispatcher()) {
    warm_up();
    std::string first;
    run(loop(), decide_into(backend_, policy_, held_, &first));
    EXPECT_EQ(first, "remaining 2");
    migration_ = cluster_.start_migrating(slot_);
  }
  ClientOptions options() const {
    ClientOptions options;
    options.url = cluster_.url();
    options.reservation_lease = 0ms;
    options.max_batch = 64;
    // Why short: a test pauses a primary for three of them, which must stay below the
    // cluster's node timeout (1 s), or the cluster would mark it failing.
    options.command_timeout = 150ms;
    return options;
  }
  /// Reads the slot map, connects to every primary and loads the script there, each asked
  /// until it answers within the short timeout: on a busy machine the first call, which does
  /// all of it, may not.
  void warm_up() {
    for (const std::size_t primary : cluster_.primaries()) {
      const int slot = cluster_.slots_of(primary).front();
      std::string key_base;
      for (int i = 0; key_base.empty() || key_slot(key_base) != slot; ++i)
        key_base = "{warm-up-" + std::to_string(i) + "}";
      std::string answer = "error";
      for (int attempt = 0; attempt < 20 && answer.rfind("error", 0) == 0; ++attempt)
        run(loop(), decide_into(backend_, policy_, key_base, &answer));
      ASSERT_EQ(answer.rfind("error", 0), std::string::npos) << "primary " << primary;
    }
  }
  /// Decides on held_, fresh_ and held_ again, as one batch.
  std::vector<Task<void>> three_calls(std::vector<std::string>& answers) {
    std::vector<Task<void>> tasks;
    tasks.push_back(decide_into(backend_, policy_, held_, &answers[0]));
    tasks.push_back(decide_into(backend_, policy_, fresh_, &answers[1]));
    tasks.push_back(decide_into(backend_, policy_, held_, &answers[2]));
    return tasks;
  }
  /// Runs three_calls() in one loop turn, so that they go as one batch, until all have ended.
  void run_three_calls(std::vector<std::string>& answers) {
    run(loop(), [&]() -> Task<void> {
      TaskGroup group;
      for (Task<void>& task : three_calls(answers))
        group.add(std::move(task));
      co_await group.join();
    }());
  }
  /// A key base of another slot the source primary serves: below slot_ when `below` (its
  /// calls lead a batch with the migrating slot's, whose keys then go as arguments), else
  /// above (the migrating slot's calls lead, their keys declared).
  std::string other_on_source(bool below) const {
    const std::vector<int> served = cluster_.slots_of(migration_.from);
    for (int i = 0;; ++i) {
      std::string candidate = "{source-" + std::to_string(i) + "}";
      const int slot = key_slot(candidate);
      if (slot != slot_ && (slot < slot_) == below && std::ranges::binary_search(served, slot)) {
        return candidate;
      }
    }
  }
  /// Runs decisions on `key_bases` in one loop turn (one batch per primary) until all have
  /// ended; their answers in order.
  std::vector<std::string> run_together(const std::vector<std::string>& key_bases) {
    std::vector<std::string> answers(key_bases.size());
    run(loop(), [&]() -> Task<void> {
      TaskGroup group;
      for (std::size_t i = 0; i < key_bases.size(); ++i)
        group.add(decide_into(backend_, policy_, key_bases[i], &answers[i]));
      co_await group.join();
    }());
    return answers;
  }
  /// Ends the migration: the slot's keys move to the importing primary, which every primary
  /// then names as the slot's owner (the client's slot map still names the source).
  void finish_migration() {
    const std::string slot = std::to_string(slot_);
    const Reply keys =
        cluster_.node(migration_.from).command({"CLUSTER", "GETKEYSINSLOT", slot, "100"});
    ASSERT_FALSE(keys.elements.empty());
    std::vector<std::string> migrate{
        "MIGRATE", "127.0.0.1", std::to_string(cluster_.node(migration_.to).port()), "", "0",
        "5000",    "KEYS"};
    for (const Reply& key : keys.elements)
      migrate.push_back(key.as_string());
    ASSERT_EQ(cluster_.node(migration_.from).command(migrate).as_string(), "OK");
    cluster_.confirm_owner({slot_}, migration_.to);
  }
  void expect_answered_as_alone(const std::vector<std::string>& answers) const {
    EXPECT_EQ(answers[0], "remaining 1") << "on the node that holds its key";
    EXPECT_EQ(answers[1], "remaining 2") << "after ASK, on the node importing the slot";
    EXPECT_EQ(answers[2], "remaining 0");
    EXPECT_NE(cluster_.node(migration_.from)
                  .command({"INFO", "errorstats"})
                  .str.find("errorstat_TRYAGAIN"),
              std::string::npos)
        << "the calls must have gone as a batch first";
    EXPECT_EQ(
        cluster_.node(migration_.to).integer({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot_)}),
        1);
  }

  const std::string held_ = "{migrating}held";
  const std::string fresh_ = "{migrating}fresh";
  const int slot_ = key_slot(held_);
  const std::shared_ptr<const CompiledPolicy> policy_ =
      CompiledPolicy::compile(Policy::of(Limit::gcra(Rate{3, 1h})));
  Client client_;
  RedisBackend backend_;
  test::RedisCluster::Migration migration_{};
};

// Why: Redis answers a command whose keys of a migrating slot are split between the two nodes
// with TRYAGAIN until the migration ends, and a batch is such a command; each of its calls alone
// would have run: on the node that still holds its key, or after ASK on the one importing it.
TEST_F(MigratingSlot, ABatchWhoseKeysTheSlotSplitsIsAnsweredCallByCall) {
  std::vector<std::string> answers(3);
  run_three_calls(answers);
  run(loop(), client_.close());
  expect_answered_as_alone(answers);
}

// Why: close() waits for the batches in flight; a batch answered TRYAGAIN used to count as
// ended before its calls went again, and close() then refused them.
TEST_F(MigratingSlot, CloseWhileTheBatchIsAnsweredTryAgainStillAnswersEachCall) {
  std::vector<std::string> answers(3);
  std::vector<test::StartedTask> tasks;
  for (Task<void>& task : three_calls(answers))
    tasks.push_back(test::start(std::move(task)));
  uv_run(loop(), UV_RUN_NOWAIT);  // the batch goes
  run(loop(), client_.close());
  for (std::size_t i = 0; i < tasks.size(); ++i)
    EXPECT_TRUE(tasks[i].done()) << "call " << i << " never completed";
  expect_answered_as_alone(answers);
}

// Why: a batch answered TRYAGAIN went uncounted by the circuit breaker; when it was the probe
// of a half-open breaker, the breaker stayed half-open and refused the calls sent again alone.
TEST_F(MigratingSlot, ABatchThatProbesAHalfOpenBreakerAndMeetsTryAgainClosesIt) {
  // Why another key of the same primary: the paused calls run when it resumes.
  std::string other;
  for (int i = 0; other.empty(); ++i) {
    const std::string candidate = "{other-" + std::to_string(i) + "}";
    const int slot = key_slot(candidate);
    if (slot != slot_ && cluster_.primary_of_slot(slot) == migration_.from) other = candidate;
  }
  cluster_.node(migration_.from).pause();
  for (int i = 0; i < 3; ++i) {
    std::string answer;
    run(loop(), decide_into(backend_, policy_, other, &answer));
    ASSERT_EQ(answer.rfind("error", 0), 0u) << answer;
  }
  cluster_.node(migration_.from).resume();
  std::this_thread::sleep_for(100ms);  // the breaker's first open period is 50 ms

  std::vector<std::string> answers(3);
  run_three_calls(answers);
  run(loop(), client_.close());
  expect_answered_as_alone(answers);
}

// Why: a batch of a primary's calls across slots declares only the keys of its first slot;
// a call of the migrating slot on a key the source no longer holds is refused alone inside the
// batch (Redis: "Script attempted to access a non local key"), having run nothing, and goes
// again alone, after ASK to the importing primary; the batch's other calls are answered by it.
TEST_F(MigratingSlot, ACallOfABatchAcrossSlotsOnAKeyTheSourceNoLongerHoldsGoesAloneAfterAsk) {
  const std::string other = other_on_source(true);
  const long long from_before = cluster_.node(migration_.from).script_calls();
  const std::vector<std::string> answers = run_together({other, held_, fresh_, held_});
  const long long from_calls = cluster_.node(migration_.from).script_calls() - from_before;
  run(loop(), client_.close());

  EXPECT_EQ(answers[0], "remaining 2") << "the other slot's call";
  EXPECT_EQ(answers[1], "remaining 1") << "on the node that holds its key";
  EXPECT_EQ(answers[2], "remaining 2") << "after ASK, on the node importing the slot";
  EXPECT_EQ(answers[3], "remaining 0");
  EXPECT_EQ(from_calls, 1) << "one batch on the source, across both slots";
  EXPECT_EQ(
      cluster_.node(migration_.to).integer({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot_)}),
      1);
}

// Why: when the migrating slot's calls lead the batch, their keys are declared, and Redis
// answers the whole batch TRYAGAIN (the keys split between two nodes); every call goes alone.
TEST_F(MigratingSlot, ABatchAcrossSlotsLedByTheMigratingSlotIsAnsweredCallByCall) {
  const std::string other = other_on_source(false);
  const std::vector<std::string> answers = run_together({held_, fresh_, held_, other});
  run(loop(), client_.close());

  expect_answered_as_alone(answers);
  EXPECT_EQ(answers[3], "remaining 2") << "the other slot's call";
}

// Why: after a slot moved, the client's slot map still names the source until a MOVED; a call
// of the moved slot in a batch across slots is refused inside the batch and goes alone, after
// MOVED to the slot's new primary, with the state its key carried over.
TEST_F(MigratingSlot, ACallOfABatchAcrossSlotsWhoseSlotMovedAwayGoesAloneAfterMoved) {
  finish_migration();
  const std::string other = other_on_source(true);
  const std::vector<std::string> answers = run_together({other, held_, held_});
  run(loop(), client_.close());

  EXPECT_EQ(answers[0], "remaining 2") << "the other slot's call";
  EXPECT_EQ(answers[1], "remaining 1") << "on the slot's new primary";
  EXPECT_EQ(answers[2], "remaining 0");
  EXPECT_EQ(
      cluster_.node(migration_.from).integer({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot_)}),
      0);
}

// Why: a batch led by a slot that moved is answered MOVED as a whole; it is not followed (the
// new primary need not serve the batch's other slots): every call goes alone.
TEST_F(MigratingSlot, ABatchAcrossSlotsLedByASlotThatMovedIsAnsweredCallByCall) {
  finish_migration();
  const std::string other = other_on_source(false);
  const std::vector<std::string> answers = run_together({held_, held_, other});
  run(loop(), client_.close());

  EXPECT_EQ(answers[0], "remaining 1") << "on the slot's new primary";
  EXPECT_EQ(answers[1], "remaining 0");
  EXPECT_EQ(answers[2], "remaining 2") << "the other slot's call, on the source";
}

}  // namespace
}  // namespace redlimit::detail
