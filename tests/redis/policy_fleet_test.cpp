// A fleet follows one stored policy while it changes: three follower processes
// (tests/redis/fleet_follower.cpp), refused with PolicyNotFound before any policy exists (never
// an allow: no admission precedes the first version), hammer three keys of one name while this
// process changes the policy stored under it with PolicyStore: stored, loosened, tightened,
// another algorithm, a window shrunk, an override added and removed for one key, proportional
// and reset changes (one run for the buckets, one for the windows). Every key's admitted
// decisions, merged from all processes, must obey the guarantee (test::check_transitions): the
// versions used on one state never go back, none is used later than a newer one's since + the
// propagation bound, and each version's limits hold from its since on, counting what was
// admitted before as its carry says. A key's history holds only the changes that set its
// policy, each with its stored version and time: the name's policy for a key without an
// override; the override's set and removal for the tier key. The measured propagation is
// printed, not asserted.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>
#include <thread>

#include "redlimit/client.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/policy_store.hpp"
#include "redlimit/runtime.hpp"
#include "support/child_process.hpp"
#include "support/decision_checker.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

constexpr int processes = 3;
constexpr int coroutines_per_key = 2;
constexpr auto turn = 10ms;
constexpr auto between_changes = 600ms;
constexpr char name[] = "fleet";
constexpr char tier_key[] = "tier";
const std::vector<std::string> keys = {"a", "b", tier_key};

/// A change of the stored policy, made by this process.
struct Change {
  enum Kind { try_set, set, set_override, remove_override } kind;
  const char* policy;  ///< the text form; unused by remove_override
  Carry carry = Carry::as_is;
  const char* what;
};

/// The versions one key followed, in order, and the change that made each.
struct KeyHistory {
  std::vector<test::PolicyVersion> versions;
  std::vector<const char*> made_by;
};

/// One run of the fleet: the changes made, in order.
struct FleetCase {
  const char* name;
  std::vector<Change> changes;
};

/// gtest names a failing run by this.
void PrintTo(const FleetCase& fleet_case, std::ostream* out) {
  *out << fleet_case.name;
}

// Why two runs: each family of algorithms gets every kind of change, and a failure names the
// family whose conversion broke.
const FleetCase buckets = {
    "buckets",
    {
        {Change::try_set, "gcra 20/s burst 10", Carry::as_is, "stored"},
        {Change::set, "gcra 60/s burst 30", Carry::as_is, "loosened"},
        {Change::set, "gcra 5/s burst 5", Carry::as_is, "tightened"},
        {Change::set_override, "gcra 2/s burst 2", Carry::as_is, "override added"},
        {Change::remove_override, "", Carry::as_is, "override removed"},
        {Change::set, "token_bucket 30/s burst 15", Carry::as_is, "another algorithm: token"},
        {Change::set, "token_bucket 10/s burst 5", Carry::proportional, "proportional"},
        {Change::set, "token_bucket 40/s burst 20", Carry::reset, "reset"},
    }};
const FleetCase windows = {
    "windows",
    {
        {Change::try_set, "fixed_window 30/2s", Carry::as_is, "stored"},
        {Change::set, "fixed_window 10/500ms", Carry::as_is, "window shrunk"},
        {Change::set_override, "fixed_window 3/500ms", Carry::as_is, "override added"},
        {Change::remove_override, "", Carry::as_is, "override removed"},
        {Change::set, "fixed_window 20/500ms", Carry::proportional, "proportional"},
        {Change::set, "sliding_window_counter 20/s", Carry::as_is, "another algorithm: counter"},
        {Change::set, "sliding_window_counter 10/2s", Carry::as_is, "counter tightened"},
        {Change::set, "sliding_window_log 20/s", Carry::as_is, "another algorithm: log"},
        {Change::set, "sliding_window_log 5/2s", Carry::as_is, "log tightened"},
        {Change::set, "fixed_window 10/10s", Carry::as_is, "another algorithm: fixed"},
        {Change::set, "fixed_window 10/10s", Carry::reset, "reset"},
        {Change::set_override, "fixed_window 2/10s", Carry::as_is, "override after a reset"},
    }};

std::string fleet_follower_binary() {
  const char* path = std::getenv("REDLIMIT_FLEET_FOLLOWER");
  return path != nullptr ? path : "fleet_follower";
}

class PolicyFleet : public test::LoopTest, public ::testing::WithParamInterface<FleetCase> {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    LoopTest::TearDown();
  }

  /// Makes `change` and appends, to the history of every key whose policy it set, the version
  /// the key follows from then on (a change of one key's override sets no other key's policy).
  void make(const Change& change, std::map<std::string, KeyHistory>& history) {
    switch (change.kind) {
      case Change::try_set:
        ASSERT_TRUE(run(loop(), store_.try_set(name, Policy::parse(change.policy))));
        break;
      case Change::set:
        run(loop(), store_.set(name, Policy::parse(change.policy), change.carry));
        break;
      case Change::set_override:
        run(loop(), store_.set_override(name, tier_key, Policy::parse(change.policy)));
        break;
      case Change::remove_override:
        run(loop(), store_.remove_override(name, tier_key));
        break;
    }
    const StoredPolicies stored = run(loop(), store_.read(name));
    ASSERT_TRUE(stored.policy);
    for (const std::string& key : keys) {
      const auto tier = stored.overrides.find(key);
      const auto removal = stored.removed_overrides.find(key);
      test::PolicyVersion followed;
      if (tier != stored.overrides.end()) {
        followed = {tier->second.version, tier->second.policy, tier->second.since_us, Carry::as_is};
      } else if (removal != stored.removed_overrides.end()) {
        followed = {removal->second.version, stored.policy->policy, removal->second.since_us,
                    Carry::as_is};
      } else {
        followed = {stored.policy->version, stored.policy->policy, stored.policy->since_us,
                    stored.policy->carry};
      }
      KeyHistory& key_history = history[key];
      if (!key_history.versions.empty() &&
          key_history.versions.back().version == followed.version) {
        continue;
      }
      key_history.versions.push_back(followed);
      key_history.made_by.push_back(change.what);
    }
  }

  test::RedisServer server_;
  Client client_{loop(), ClientOptions{.url = server_.url()}};
  PolicyStore store_{client_};
};

struct FollowerLogs {
  std::map<std::string, std::vector<test::VersionedAdmit>> admits;  ///< per key
  /// Per key, every decision made in Redis (permits 0: a denial), for the propagation figures.
  std::map<std::string, std::vector<test::VersionedAdmit>> decisions;
  std::vector<std::string> other_errors;
};

void read_log(const std::string& path, FollowerLogs& logs) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string kind;
    fields >> kind;
    if (kind == "admit" || kind == "deny") {
      std::string key;
      test::VersionedAdmit decision;
      fields >> key >> decision.time_us >> decision.permits >> decision.policy_version;
      logs.decisions[key].push_back(decision);
      if (kind == "admit") logs.admits[key].push_back(decision);
    } else if (line.rfind("error not_found ", 0) != 0) {
      logs.other_errors.push_back(line);
    }
  }
}

/// "version <v>: <change> (<policy>)" per line, to read a failure by.
std::string versions_made(const KeyHistory& history) {
  std::string lines;
  for (std::size_t index = 0; index < history.versions.size(); ++index) {
    lines += "version " + std::to_string(history.versions[index].version) + ": " +
             history.made_by[index] + " (" + to_string(history.versions[index].policy) + ")\n";
  }
  return lines;
}

/// Per key and change of its policy, when the fleet switched: the last decision made in Redis
/// under an older version after the change, and the first under it or a newer one, in ms after
/// the change's since.
void print_propagation(const std::map<std::string, KeyHistory>& history, const FollowerLogs& logs) {
  std::printf(
      "propagation (ms after since): change, key, last decision under an older version, "
      "first under it or a newer one\n");
  for (const std::string& key : keys) {
    const KeyHistory& key_history = history.at(key);
    for (std::size_t index = 1; index < key_history.versions.size(); ++index) {
      const test::PolicyVersion& version = key_history.versions[index];
      std::int64_t last_old = -1;
      std::int64_t first_new = -1;
      for (const test::VersionedAdmit& admit : logs.decisions.at(key)) {
        const std::int64_t after = admit.time_us - version.since_us;
        if (admit.policy_version < version.version && after >= 0) {
          last_old = std::max(last_old, after);
        } else if (admit.policy_version >= version.version &&
                   (first_new < 0 || after < first_new)) {
          first_new = after;
        }
      }
      std::printf("  %-26s %-5s %9s %9s\n", key_history.made_by[index], key.c_str(),
                  last_old < 0 ? "none" : std::to_string(last_old / 1000.0).c_str(),
                  first_new < 0 ? "none" : std::to_string(first_new / 1000.0).c_str());
    }
  }
}

/// The follower processes: started at construction; stopped (their stop files created) and
/// waited for by stop(), also when a test fails early.
class Followers {
 public:
  Followers(const test::RedisServer& server) {
    for (int i = 0; i < processes; ++i) {
      outputs_.push_back(server.dir() + "/fleet-" + std::to_string(i) + ".txt");
      std::vector<std::string> args = {fleet_follower_binary(),
                                       server.url(),
                                       name,
                                       std::to_string(coroutines_per_key),
                                       std::to_string(std::chrono::microseconds(turn).count()),
                                       outputs_.back()};
      args.insert(args.end(), keys.begin(), keys.end());
      pids_.push_back(test::start_process(args));
    }
  }
  ~Followers() { stop(); }
  Followers(const Followers&) = delete;
  Followers& operator=(const Followers&) = delete;

  /// Whether every follower has been refused with PolicyNotFound, after waiting up to `limit`.
  bool all_waiting_for_a_policy(std::chrono::milliseconds limit) const {
    const auto give_up = std::chrono::steady_clock::now() + limit;
    for (const std::string& output : outputs_) {
      while (access((output + ".waiting").c_str(), F_OK) != 0) {
        if (std::chrono::steady_clock::now() > give_up) return false;
        std::this_thread::sleep_for(10ms);
      }
    }
    return true;
  }

  /// Stops every follower and waits for it; true if all exited with 0.
  bool stop() {
    for (const std::string& output : outputs_)
      std::ofstream(output + ".stop") << "\n";
    bool clean = true;
    for (const pid_t pid : std::exchange(pids_, {})) {
      int status = 0;
      waitpid(pid, &status, 0);
      clean = clean && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    return clean;
  }

  const std::vector<std::string>& outputs() const { return outputs_; }

 private:
  std::vector<std::string> outputs_;
  std::vector<pid_t> pids_;
};

TEST_P(PolicyFleet, FollowersStartedBeforeAnyPolicyObeyEveryChangeAsItsCarrySays) {
  const std::vector<Change>& changes = GetParam().changes;
  Followers followers(server_);
  ASSERT_TRUE(followers.all_waiting_for_a_policy(30s))
      << "a follower never got PolicyNotFound before any policy was stored";
  std::map<std::string, KeyHistory> history;
  for (const Change& change : changes) {
    make(change, history);
    std::this_thread::sleep_for(between_changes);
  }
  EXPECT_TRUE(followers.stop()) << "a follower failed (a uv handle left open)";

  FollowerLogs logs;
  for (const std::string& output : followers.outputs())
    read_log(output, logs);
  EXPECT_TRUE(logs.other_errors.empty())
      << logs.other_errors.size() << " errors, the first: " << logs.other_errors.front();
  const auto bound =
      std::chrono::duration_cast<std::chrono::microseconds>(LimiterOptions{}.policy_refresh + 1s);
  for (const std::string& key : keys) {
    SCOPED_TRACE(key);
    const std::vector<test::VersionedAdmit>& admits = logs.admits[key];
    const std::vector<test::PolicyVersion>& versions = history[key].versions;
    ASSERT_GT(admits.size(), versions.size());
    const test::CheckResult check = test::check_transitions(versions, admits, bound);
    EXPECT_TRUE(check) << check.description << "\n" << versions_made(history[key]);
    const std::vector<test::VersionedAdmit>& decisions = logs.decisions[key];
    EXPECT_TRUE(std::any_of(decisions.begin(), decisions.end(),
                            [&](const test::VersionedAdmit& decision) {
                              return decision.policy_version == versions.back().version;
                            }))
        << "no decision was made under the last version";
  }
  print_propagation(history, logs);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, PolicyFleet, ::testing::Values(buckets, windows),
                         [](const ::testing::TestParamInfo<FleetCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace redlimit
