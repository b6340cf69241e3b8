// In process each limiter keeps its own state, so acquire_all() reserves claim after claim,
// each on its limiter's backend (LocalBackend::reserve_claims()). It must decide as
// reserve_at_one_slot() over every claim does, which one backend holding every key runs
// (reserve_group()): the same random sequences, over three backends of one key each and over one
// backend of the three keys, must agree on every field. Each key is under one gcra, token_bucket
// or leaky_bucket limit; a step reserves a random subset of the keys in random order (ties of
// waits and of remaining permits are frequent with small limits), or takes from one key at once
// (the queue that later reservations join).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <string>
#include <vector>

#include "limiter/local_backend.hpp"
#include "policy/compiled_policy.hpp"
#include "redlimit/runtime.hpp"
#include "support/decision_text.hpp"
#include "support/loop_test.hpp"
#include "support/random_epoch.hpp"
#include "support/valid_limit.hpp"

namespace redlimit::detail {
namespace {

using test::pick;

constexpr int sequences = 300;
constexpr int steps_per_sequence = 40;
constexpr std::size_t keys_per_sequence = 3;

const Algorithm reservable[] = {Algorithm::gcra, Algorithm::token_bucket, Algorithm::leaky_bucket};

/// A small limit (a few permits per period of up to a second), so that waits and ties are common.
Limit small_limit(std::mt19937_64& random) {
  const Algorithm algorithm = reservable[pick(random, 0, std::size(reservable) - 1)];
  return test::first_valid_limit([&] {
    Limit limit{algorithm,
                {pick(random, 1, 4), std::chrono::microseconds(pick(random, 1'000, 1'000'000))}};
    if (pick(random, 0, 2) == 0) limit.burst = pick(random, 1, 2 * limit.rate.permits);
    return limit;
  });
}

/// What differs between two reservations of the same claims, or empty.
std::string difference(const ClaimsReservation& apart, const ClaimsReservation& together) {
  const Decision& a = apart.decision;
  const Decision& t = together.decision;
  if (a.allowed != t.allowed || a.claim != t.claim || a.limit != t.limit ||
      a.remaining != t.remaining || a.retry_after != t.retry_after ||
      a.reset_after != t.reset_after || a.policy_version != t.policy_version ||
      apart.wait_us != together.wait_us || apart.slot_us != together.slot_us ||
      apart.claims.size() != together.claims.size()) {
    return "apart " + test::describe(a) + " wait " + std::to_string(apart.wait_us) + " slot " +
           std::to_string(apart.slot_us) + "\n  together " + test::describe(t) + " wait " +
           std::to_string(together.wait_us) + " slot " + std::to_string(together.slot_us);
  }
  for (std::size_t c = 0; c < apart.claims.size(); ++c) {
    const CancelTicket& x = apart.claims[c].ticket;
    const CancelTicket& y = together.claims[c].ticket;
    if (!(x.slot == y.slot) || x.den != y.den || x.d != y.d || x.version != y.version ||
        x.epoch != y.epoch || x.cancels_before != y.cancels_before) {
      return "claim " + std::to_string(c) + "'s ticket: slot " + std::to_string(x.slot.us) +
             " vs " + std::to_string(y.slot.us) + ", version " + std::to_string(x.version) +
             " vs " + std::to_string(y.version);
    }
  }
  return {};
}

class LocalClaims : public test::LoopTest {};

TEST_F(LocalClaims, ReservedClaimAfterClaimOnSeveralBackendsAsAtOneSlotOverEveryClaim) {
  const std::uint64_t seed = std::random_device{}();
  std::mt19937_64 random(seed);
  int reservations = 0;
  int waits = 0;
  int denials = 0;
  for (int sequence = 0; sequence < sequences; ++sequence) {
    std::array<LocalBackend, keys_per_sequence> apart;  // one key each
    LocalBackend together;                              // every key
    std::vector<std::shared_ptr<const CompiledPolicy>> policies;
    for (std::size_t k = 0; k < keys_per_sequence; ++k)
      policies.push_back(CompiledPolicy::compile(Policy::of(small_limit(random))));
    std::int64_t now = 1'795'000'000'000'000 + pick(random, 0, 100'000'000'000);
    for (int step = 0; step < steps_per_sequence; ++step) {
      now += pick(random, 0, 2) == 0 ? 0 : pick(random, 1, 300'000);
      std::vector<std::size_t> order = {0, 1, 2};
      std::shuffle(order.begin(), order.end(), random);
      order.resize(static_cast<std::size_t>(pick(random, 1, keys_per_sequence)));
      std::vector<DecideRequest> requests;
      std::vector<Backend*> backends;
      for (const std::size_t k : order) {
        const std::int64_t most = std::min<std::int64_t>(2, policies[k]->limits().front().capacity);
        requests.emplace_back(policies[k], KeyBase("rl:{claims-" + std::to_string(k) + "}"),
                              Operation::acquire, pick(random, 1, most), now);
        requests.back().claim = requests.size() - 1;
        backends.push_back(&apart[k]);
      }
      if (pick(random, 0, 3) == 0) {  // a take on one key
        const Decision a = run(loop(), apart[order.front()].decide(requests.front()));
        const Decision t = run(loop(), together.decide(requests.front()));
        ASSERT_EQ(a.allowed, t.allowed) << "seed " << seed << " sequence " << sequence;
        continue;
      }
      const std::int64_t max_wait = pick(random, 0, 3) == 0 ? 0 : pick(random, 1, 2'000'000);
      const ClaimsReservation a = run(
          loop(),
          backends.front()->reserve_claims(backends, requests, [max_wait] { return max_wait; }));
      const ClaimsReservation t = run(loop(), together.reserve_group(requests, max_wait, 0, false));
      ASSERT_EQ(difference(a, t), "")
          << "seed " << seed << " sequence " << sequence << " step " << step;
      ++reservations;
      waits += a.decision.allowed && a.wait_us > 0 ? 1 : 0;
      denials += a.decision.allowed ? 0 : 1;
    }
  }
  // The sequences reach every case: reservations at once, after a wait, and denied.
  EXPECT_GT(reservations, sequences * steps_per_sequence / 2);
  EXPECT_GT(waits, reservations / 10);
  EXPECT_GT(denials, reservations / 20);
}

}  // namespace
}  // namespace redlimit::detail
