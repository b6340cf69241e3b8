// try_acquire_all's script and its C++ model decide the same random sequences of decisions over
// several claims, with the same injected clock, and must agree on every field: the several-claim
// form of the decide script (lua/shapes/general.lua, acquire_all and peek_all) against
// decide_claims() (src/algorithms/policy_model.cpp). Each sequence has three keys, each under a
// policy of one or two limits of random algorithms; each step claims a random subset of them,
// in random order, so that runs of decisions where one claim denies and the others would have
// allowed are frequent: those must take nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "algorithms/policy_model.hpp"
#include "limiter/redis_backend.hpp"
#include "policy/compiled_policy.hpp"
#include "redlimit/client.hpp"
#include "redlimit/runtime.hpp"
#include "support/decision_text.hpp"
#include "support/loop_test.hpp"
#include "support/random_epoch.hpp"
#include "support/redis_server.hpp"
#include "support/valid_limit.hpp"

namespace redlimit::detail {
namespace {

using namespace std::chrono_literals;

constexpr int sequences = 400;
constexpr int steps_per_sequence = 40;
constexpr std::size_t keys_per_sequence = 3;

using test::pick;

const Algorithm algorithms[] = {
    Algorithm::gcra,         Algorithm::token_bucket,       Algorithm::leaky_bucket,
    Algorithm::fixed_window, Algorithm::sliding_window_log, Algorithm::sliding_window_counter};

/// A small limit (a few permits per period of up to a second), so that steps deny often.
Limit small_limit(std::mt19937_64& random) {
  return test::first_valid_limit([&] {
    Limit limit{algorithms[pick(random, 0, std::size(algorithms) - 1)],
                {pick(random, 1, 6), std::chrono::microseconds(pick(random, 1'000, 1'000'000))},
                0,
                pick(random, 0, 1) == 0 ? Window::aligned : Window::anchored};
    if (pick(random, 0, 2) == 0) limit.burst = pick(random, 1, 3 * limit.rate.permits);
    return limit;
  });
}

struct ClaimedKey {
  std::shared_ptr<const CompiledPolicy> policy;
  std::string key_base;
  std::vector<std::optional<LimitState>> states;
};

struct Tally {
  int decisions = 0;
  int allowed = 0;
  int denied_with_an_allowing_claim = 0;
  std::vector<std::string> mismatches;
};

Task<void> run_sequence(Client& client, std::uint64_t seed, int index, Tally* tally) {
  std::mt19937_64 random(seed);
  RedisBackend backend(client.dispatcher());
  const std::span<Backend* const> backends;  // RedisBackend decides through its own client
  std::vector<ClaimedKey> keys;
  for (std::size_t k = 0; k < keys_per_sequence; ++k) {
    Policy policy;
    for (std::int64_t l = pick(random, 1, 2); l > 0; --l)
      policy.limits.push_back(small_limit(random));
    auto compiled = CompiledPolicy::compile(policy);
    const std::size_t limits = compiled->limits().size();
    keys.push_back({std::move(compiled),
                    "rl:{claims-" + std::to_string(index) + "-" + std::to_string(k) + "}",
                    std::vector<std::optional<LimitState>>(limits)});
  }
  std::int64_t now = 1'795'000'000'000'000 + pick(random, 0, 100'000'000'000);
  for (int step = 0; step < steps_per_sequence; ++step) {
    now += pick(random, 0, 3) == 0 ? 0 : pick(random, 1, 400'000);
    std::vector<std::size_t> order = {0, 1, 2};
    std::shuffle(order.begin(), order.end(), random);
    order.resize(static_cast<std::size_t>(pick(random, 1, keys_per_sequence)));
    const Operation operation = pick(random, 0, 4) == 0 ? Operation::peek : Operation::acquire;
    std::vector<DecideRequest> requests;
    std::vector<ClaimModel> claims;
    for (std::size_t k : order) {
      ClaimedKey& key = keys[k];
      std::int64_t most = 3;  // never beyond a capacity: the limiter refuses those before I/O
      for (const CompiledLimit& limit : key.policy->limits())
        most = std::min(most, limit.capacity);
      const std::int64_t permits = pick(random, 1, most);
      requests.emplace_back(key.policy, KeyBase(key.key_base), operation, permits, now);
      requests.back().claim = requests.size() - 1;
      claims.push_back({key.policy->specs(), key.states, permits, key.policy->change()});
    }
    const ClaimsDecision decided = co_await backend.decide_claims(backends, requests, operation);
    const Decision& script = decided.decision;
    const PolicyOutcome model =
        decide_claims(claims, now, operation == Operation::peek ? Mode::peek : Mode::acquire);
    // Which claim and which of its limits the model's binding is.
    std::size_t claim = 0;
    std::size_t binding = model.binding;
    while (binding >= claims[claim].limits.size())
      binding -= claims[claim++].limits.size();
    const LimitOutcome& bound = model.binding_outcome();
    ++tally->decisions;
    tally->allowed += model.allowed ? 1 : 0;
    if (!model.allowed) {
      tally->denied_with_an_allowing_claim +=
          std::any_of(model.limits.begin(), model.limits.end(),
                      [](const LimitOutcome& limit) { return limit.allowed; })
              ? 1
              : 0;
    }
    const bool same =
        script.allowed == model.allowed && script.claim == claim && script.binding == binding &&
        script.limit == bound.limit && script.remaining == bound.remaining &&
        script.retry_after.count() == bound.retry_after_us &&
        script.reset_after.count() == bound.reset_after_us && script.server_time_us == model.now_us;
    if (!same && tally->mismatches.size() < 5) {
      Decision expected;
      expected.allowed = model.allowed;
      expected.limit = bound.limit;
      expected.remaining = bound.remaining;
      expected.retry_after = std::chrono::microseconds(bound.retry_after_us);
      expected.reset_after = std::chrono::microseconds(bound.reset_after_us);
      expected.server_time_us = model.now_us;
      expected.binding = binding;
      tally->mismatches.push_back("sequence " + std::to_string(index) + " (seed " +
                                  std::to_string(seed) + ") step " + std::to_string(step) +
                                  ": claim " + std::to_string(script.claim) + " vs " +
                                  std::to_string(claim) + "\n  script " + test::describe(script) +
                                  "\n  model  " + test::describe(expected));
    }
  }
}

class ClaimsDifferential : public test::LoopTest {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    LoopTest::TearDown();
  }
  test::RedisServer server_;
  Client client_{loop(), ClientOptions{.url = server_.url()}};
};

TEST_F(ClaimsDifferential, TheScriptDecidesSeveralClaimsAsTheModelDoes) {
  const std::uint64_t seed = std::random_device{}();
  Tally tally;
  run(loop(), [&]() -> Task<void> {
    for (int index = 0; index < sequences; ++index)
      co_await run_sequence(client_, seed + static_cast<std::uint64_t>(index), index, &tally);
  }());
  std::printf(
      "[ claims ] %d decisions, %d allowed, %d denied while another claim allowed "
      "(seed %llu)\n",
      tally.decisions, tally.allowed, tally.denied_with_an_allowing_claim,
      static_cast<unsigned long long>(seed));
  for (const std::string& mismatch : tally.mismatches)
    ADD_FAILURE() << mismatch;
  EXPECT_EQ(tally.decisions, sequences * steps_per_sequence);
  EXPECT_GT(tally.allowed, tally.decisions / 10);
  EXPECT_GT(tally.denied_with_an_allowing_claim, tally.decisions / 20);
}

}  // namespace
}  // namespace redlimit::detail
