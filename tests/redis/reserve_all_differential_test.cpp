// acquire_all's reservations in Redis and their C++ model decide the same random sequences,
// with the same injected clock, and must agree on every field and on every value stored: the
// reserve script's reserve_all (lua/reserve.lua, with the algorithms' not_before) against
// reserve_at_one_slot() over reserve() (src/algorithms/). Each sequence has three keys, each
// under one gcra, token_bucket or leaky_bucket limit; a step reserves a random subset of them in
// random order at one slot (sometimes no earlier than a given one, as for claims across cluster
// slots; sometimes only asking for that slot, writing nothing: earliest_all), takes from one key at
// once (the queue that later requests join), cancels a part reserved earlier (which moves the
// waiters behind it), or changes a key's policy (another limit of its algorithm, under a random
// epoch: carried over, or refused as stale).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "algorithms/policy_model.hpp"
#include "algorithms/reservations.hpp"
#include "limiter/redis_backend.hpp"
#include "policy/compiled_policy.hpp"
#include "policy/stale_policy.hpp"
#include "redlimit/client.hpp"
#include "redlimit/runtime.hpp"
#include "support/decision_text.hpp"
#include "support/loop_test.hpp"
#include "support/random_epoch.hpp"
#include "support/redis_server.hpp"
#include "support/stored_state.hpp"
#include "support/valid_limit.hpp"

namespace redlimit::detail {
namespace {

using namespace std::chrono_literals;

constexpr int sequences = 300;
constexpr int steps_per_sequence = 40;
constexpr std::size_t keys_per_sequence = 3;

using test::pick;

const Algorithm reservable[] = {Algorithm::gcra, Algorithm::token_bucket, Algorithm::leaky_bucket};

/// A small limit (a few permits per period of up to a second), so that waits are common.
Limit small_limit(std::mt19937_64& random, Algorithm algorithm) {
  return test::first_valid_limit([&] {
    Limit limit{algorithm,
                {pick(random, 1, 6), std::chrono::microseconds(pick(random, 1'000, 1'000'000))}};
    if (pick(random, 0, 2) == 0) limit.burst = pick(random, 1, 3 * limit.rate.permits);
    return limit;
  });
}

struct ReservedKey {
  std::shared_ptr<const CompiledPolicy> policy;
  std::string key_base;
  std::optional<LimitState> state;  ///< the model's
};

/// A part of an earlier reservation, to cancel later.
struct Part {
  std::size_t key = 0;
  std::int64_t permits = 1;
  CancelTicket ticket;
};

struct Tally {
  int reservations = 0;
  int waited = 0;  ///< reserved at a slot ahead
  int denied = 0;
  int takes = 0;
  int cancels_returned = 0;
  int earliest_only = 0;  ///< of the reservations, those that only asked for the slot
  int policy_changes = 0;
  int stale = 0;  ///< steps refused as stale
  std::vector<std::string> mismatches;
};

class Sequence {
 public:
  Sequence(Client& client, RedisBackend& backend, std::uint64_t seed, int index, Tally* tally)
      : client_(client),
        backend_(backend),
        random_(seed),
        seed_(seed),
        index_(index),
        tally_(tally) {
    for (std::size_t k = 0; k < keys_per_sequence; ++k) {
      const Algorithm algorithm = reservable[pick(random_, 0, std::size(reservable) - 1)];
      keys_.push_back({CompiledPolicy::compile(Policy::of(small_limit(random_, algorithm))),
                       "rl:{reserve-all-" + std::to_string(index) + "-" + std::to_string(k) + "}",
                       std::nullopt});
    }
    draws_ = test::random_draws(random_);
  }

  Task<void> run() {
    now_ = 1'795'000'000'000'000 + pick(random_, 0, 100'000'000'000);
    for (step_ = 0; step_ < steps_per_sequence; ++step_) {
      now_ += pick(random_, 0, 3) == 0 ? 0 : pick(random_, 1, 300'000);
      const std::int64_t roll = pick(random_, 0, 19);
      if (roll < 12) {
        co_await reserve_some();
      } else if (roll < 16) {
        co_await take_one();
      } else if (roll < 19 && !parts_.empty()) {
        co_await cancel_one();
      } else {
        change_policy();
      }
      co_await compare_stored();
    }
  }

 private:
  std::int64_t permits_for(std::size_t key) {
    return pick(random_, 1, std::min<std::int64_t>(3, keys_[key].policy->limits()[0].capacity));
  }

  DecideRequest request(std::size_t key, std::int64_t permits) const {
    return DecideRequest(keys_[key].policy, KeyBase(keys_[key].key_base), Operation::acquire,
                         permits, now_);
  }

  /// A key's policy changes: another limit of its algorithm (without a store, often the same
  /// one), under an epoch test::random_epoch() draws (a version that sometimes goes back: the
  /// script refuses it as stale where a newer one wrote; or version 0, mostly resets).
  void change_policy() {
    ReservedKey& key = keys_[static_cast<std::size_t>(pick(random_, 0, keys_per_sequence - 1))];
    const Algorithm algorithm = key.policy->limits()[0].limit.algorithm;
    // Why the same limit often without a store: set_policy() of it with a reset.
    Policy next = key.policy->policy();
    if (!draws_.fixed || pick(random_, 0, 1) == 0)
      next = Policy::of(small_limit(random_, algorithm));
    key.policy =
        CompiledPolicy::compile(next, test::random_epoch(random_, now_, 1'000'000, draws_));
    ++tally_->policy_changes;
  }

  /// Compares a refusal as stale: the script's (its stored version, its claim) and the model's.
  void compare_stale(const char* what, std::int64_t script, std::size_t script_claim,
                     std::int64_t model, std::size_t model_claim) {
    tally_->stale += model != 0 ? 1 : 0;
    if (script != model || (model != 0 && script_claim != model_claim)) {
      mismatch(std::string(what) + " refused as stale: script " + std::to_string(script) +
               " (claim " + std::to_string(script_claim) + "), model " + std::to_string(model) +
               " (claim " + std::to_string(model_claim) + ")");
    }
  }

  void mismatch(const std::string& what) {
    if (tally_->mismatches.size() < 5) {
      tally_->mismatches.push_back("sequence " + std::to_string(index_) + " (seed " +
                                   std::to_string(seed_) + ") step " + std::to_string(step_) +
                                   ": " + what);
    }
  }

  /// reserve_all over one to three keys, in random order, with a random longest wait.
  Task<void> reserve_some() {
    std::vector<std::size_t> order = {0, 1, 2};
    std::shuffle(order.begin(), order.end(), random_);
    order.resize(static_cast<std::size_t>(pick(random_, 1, keys_per_sequence)));
    std::vector<DecideRequest> requests;
    for (const std::size_t key : order) {
      requests.push_back(request(key, permits_for(key)));
      requests.back().claim = requests.size() - 1;
    }
    const std::int64_t max_wait = pick(random_, 0, 3) == 0 ? 0 : pick(random_, 1, 2'000'000);
    // Sometimes the slot the claims in other cluster slots were reserved at (even one passed).
    const std::int64_t earliest =
        pick(random_, 0, 3) == 0 ? now_ + pick(random_, -100'000, 1'500'000) : 0;
    // Sometimes only the slot it would take, writing nothing (earliest_all).
    const bool earliest_only = pick(random_, 0, 4) == 0;

    ClaimsReservation script;
    std::int64_t script_stale = 0;
    std::size_t stale_claim = 0;
    RedisBackend unleased(client_.dispatcher(), std::chrono::microseconds(0));
    try {
      script = co_await unleased.reserve_group(requests, max_wait, earliest, earliest_only);
    } catch (const StalePolicy& stale) {
      script_stale = stale.stored_version();
      stale_claim = stale.claim();
    }
    const ReserveAllOutcome model = reserve_at_one_slot(
        order.size(), now_,
        [&](std::size_t c, std::int64_t not_before, bool dry) {
          ReservedKey& key = keys_[order[c]];
          std::optional<LimitState> copy = key.state;
          return reserve(key.policy->specs().front(), dry ? copy : key.state, now_,
                         requests[c].permits, max_wait, key.policy->change(), not_before);
        },
        earliest, earliest_only);
    if (script_stale != 0 || model.decision.stale_version != 0) {
      compare_stale("reserve_all", script_stale, stale_claim, model.decision.stale_version,
                    model.binding);
      co_return;
    }
    ++tally_->reservations;
    tally_->earliest_only += earliest_only ? 1 : 0;
    tally_->denied += model.decision.allowed ? 0 : 1;
    tally_->waited += model.decision.allowed && model.wait_us > 0 ? 1 : 0;

    Decision expected;
    expected.allowed = model.decision.allowed;
    expected.limit = model.decision.limit;
    expected.remaining = model.decision.remaining;
    expected.retry_after = std::chrono::microseconds(model.decision.retry_after_us);
    expected.reset_after = std::chrono::microseconds(model.decision.reset_after_us);
    expected.server_time_us = now_;
    const Decision& got = script.decision;
    const bool same =
        got.allowed == expected.allowed && got.claim == model.binding &&
        got.limit == expected.limit && got.remaining == expected.remaining &&
        got.retry_after == expected.retry_after && got.reset_after == expected.reset_after &&
        got.server_time_us == expected.server_time_us && script.wait_us == model.wait_us &&
        script.slot_us == model.slot_us && script.claims.size() == model.claims.size();
    if (!same) {
      mismatch("reserve_all: claim " + std::to_string(got.claim) + " vs " +
               std::to_string(model.binding) + ", wait " + std::to_string(script.wait_us) + " vs " +
               std::to_string(model.wait_us) + ", slot " + std::to_string(script.slot_us) + " vs " +
               std::to_string(model.slot_us) + "\n  script " + test::describe(got) + "\n  model  " +
               test::describe(expected));
      co_return;
    }
    for (std::size_t c = 0; c < model.claims.size(); ++c) {
      const ReservationBook& book = model.claims[c].book;
      const CancelTicket& ticket = script.claims[c].ticket;
      if (ticket.version != book.version || ticket.epoch != book.epoch ||
          ticket.cancels_before != book.cancels ||
          !(ticket.slot == FracTime{model.claims[c].slot.us, model.claims[c].slot.frac})) {
        mismatch("reserve_all: claim " + std::to_string(c) + "'s place: version " +
                 std::to_string(ticket.version) + " vs " + std::to_string(book.version) +
                 ", cancels " + std::to_string(ticket.cancels_before) + " vs " +
                 std::to_string(book.cancels) + ", slot " + std::to_string(ticket.slot.us) +
                 " vs " + std::to_string(model.claims[c].slot.us));
      }
      parts_.push_back({order[c], requests[c].permits, ticket});
    }
  }

  /// A try_acquire on one key: the queue every later request joins.
  Task<void> take_one() {
    const auto key = static_cast<std::size_t>(pick(random_, 0, keys_per_sequence - 1));
    const std::int64_t permits = permits_for(key);
    const DecideRequest requests[] = {request(key, permits)};
    Decision script;
    std::int64_t script_stale = 0;
    try {
      const std::span<Backend* const> backends;
      ClaimsDecision decided =
          co_await backend_.decide_claims(backends, requests, Operation::acquire);
      script = decided.decision;
    } catch (const StalePolicy& stale) {
      script_stale = stale.stored_version();
    }
    std::vector<std::optional<LimitState>> states = {keys_[key].state};
    const ClaimModel claims[] = {
        {keys_[key].policy->specs(), states, permits, keys_[key].policy->change()}};
    const PolicyOutcome model = decide_claims(claims, now_, Mode::acquire);
    keys_[key].state = states[0];
    if (script_stale != 0 || model.stale_version != 0) {
      compare_stale("take", script_stale, 0, model.stale_version, 0);
      co_return;
    }
    ++tally_->takes;
    const LimitOutcome& bound = model.binding_outcome();
    if (script.allowed != model.allowed || script.remaining != bound.remaining ||
        script.retry_after.count() != bound.retry_after_us ||
        script.reset_after.count() != bound.reset_after_us) {
      mismatch("take: script " + test::describe(script) + ", model allowed " +
               std::to_string(model.allowed) + " remaining " + std::to_string(bound.remaining) +
               " retry " + std::to_string(bound.retry_after_us));
    }
  }

  /// Gives back a part reserved earlier, as acquire_all does on a stop.
  Task<void> cancel_one() {
    const Part part = parts_[static_cast<std::size_t>(pick(random_, 0, parts_.size() - 1))];
    ReservedKey& key = keys_[part.key];
    // As acquire_all gives it back: under the policy in force (same algorithm, same key).
    CancelVerdict script = CancelVerdict::refused;
    std::int64_t script_stale = 0;
    try {
      const DecideRequest cancel = request(part.key, part.permits);
      const ReservationReply reply =
          co_await backend_.run_reservation(ReservationOperation::cancel, cancel, part.ticket);
      script = reply.verdict;
    } catch (const StalePolicy& stale) {
      script_stale = stale.stored_version();
    }
    const CancelOutcome model = cancel_reservation(key.policy->specs().front(), key.state, now_,
                                                   part.permits, part.ticket, key.policy->change());
    if (script_stale != 0 || model.stale_version != 0) {
      compare_stale("cancel", script_stale, 0, model.stale_version, 0);
      co_return;
    }
    tally_->cancels_returned += model.verdict == CancelVerdict::returned ? 1 : 0;
    if (script != model.verdict) {
      mismatch("cancel: script " + std::to_string(static_cast<int>(script)) + ", model " +
               std::to_string(static_cast<int>(model.verdict)));
    }
  }

  Task<void> compare_stored() {
    for (const ReservedKey& key : keys_) {
      const std::string name = key.key_base + key.policy->limits()[0].key_suffix;
      const Reply reply = co_await client_.command("GET", name);
      const std::optional<std::string> script =
          reply.is_nil() ? std::nullopt : std::optional<std::string>(reply.as_string());
      const std::optional<std::string> model =
          key.state ? test::stored_value(*key.state) : std::nullopt;
      if (script != model) {
        mismatch("stored value of " + name + ": script " + script.value_or("(none)") + ", model " +
                 model.value_or("(none)"));
      }
    }
  }

  Client& client_;
  RedisBackend& backend_;
  std::mt19937_64 random_;
  std::uint64_t seed_;
  int index_;
  Tally* tally_;
  std::vector<ReservedKey> keys_;
  std::vector<Part> parts_;
  std::int64_t now_ = 0;
  test::EpochDraws draws_;  ///< what the policy changes' epochs are drawn from
  int step_ = 0;
};

class ReserveAllDifferential : public test::LoopTest {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    LoopTest::TearDown();
  }
  test::RedisServer server_;
  Client client_{loop(), ClientOptions{.url = server_.url()}};
};

TEST_F(ReserveAllDifferential, TheScriptReservesSeveralClaimsAtOneSlotAsTheModelDoes) {
  const std::uint64_t seed = std::random_device{}();
  RedisBackend backend(client_.dispatcher());
  Tally tally;
  run(loop(), [&]() -> Task<void> {
    for (int index = 0; index < sequences; ++index) {
      Sequence sequence(client_, backend, seed + static_cast<std::uint64_t>(index), index, &tally);
      co_await sequence.run();
    }
  }());
  std::printf(
      "[ reserve_all ] %d reservations (%d at a slot ahead, %d denied), %d takes, %d parts "
      "given back, %d policy changes, %d steps refused as stale, %d slots only asked for "
      "(seed %llu)\n",
      tally.reservations, tally.waited, tally.denied, tally.takes, tally.cancels_returned,
      tally.policy_changes, tally.stale, tally.earliest_only,
      static_cast<unsigned long long>(seed));
  for (const std::string& mismatch : tally.mismatches)
    ADD_FAILURE() << mismatch;
  EXPECT_GT(tally.waited, tally.reservations / 5);
  EXPECT_GT(tally.denied, tally.reservations / 20);
  EXPECT_GT(tally.cancels_returned, 50);
  EXPECT_GT(tally.stale, 0);
}

}  // namespace
}  // namespace redlimit::detail
