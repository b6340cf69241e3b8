// Each algorithm's script and its C++ model decide the same random request sequences, with the
// same injected clock, and must agree on every field of every decision. This test is what keeps
// lua/ and src/algorithms/ one algorithm. Every script shape lua/embed.py generates from
// lua/algorithms/ runs here: a single-limit acquire runs the algorithm's lean script
// (decide_<algorithm>, lua/shapes/lean.lua) when it has one; some acquires and every peek of the
// same sequences run the general decide script (lua/shapes/general.lua) instead, so that each
// reads the state the other wrote. Sequences change their policy on the way, with a policy
// version (sometimes an older one: the scripts refuse it as stale), a since and a carry; for the
// bucket algorithms the value stored in Redis must equal the model's state after every step.
// The clock also steps backwards, within a period or by up to an hour. Refunds (also of a take at
// an earlier step's time), penalties and blocks (lua/shapes/adjust.lua) come between the
// decisions, against their model
// (src/algorithms/adjustments.cpp).
// The in-process backend (LocalBackend) runs the same random sequences against Redis too, with
// Redis's expiry of each key replayed on the injected clock: it must answer every step as Redis
// does, also just after a key stopped mattering, while Redis still keeps it.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <random>
#include <sstream>

#include "algorithms/adjustments.hpp"
#include "algorithms/policy_model.hpp"
#include "algorithms/reservation_leases.hpp"
#include "algorithms/reservations.hpp"
#include "limiter/local_backend.hpp"
#include "limiter/redis_backend.hpp"
#include "policy/stale_policy.hpp"
#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/task_group.hpp"
#include "support/decision_text.hpp"
#include "support/loop_test.hpp"
#include "support/random_epoch.hpp"
#include "support/redis_server.hpp"
#include "support/stored_state.hpp"
#include "support/valid_limit.hpp"

namespace redlimit::detail {
namespace {

using namespace std::chrono_literals;

/// Sequences per case: $REDLIMIT_DIFFERENTIAL_SEQUENCES, else 10,000 (scripts/test runs fewer
/// under the sanitizers, where each costs several times as much).
const int sequences_per_case = [] {
  const char* text = std::getenv("REDLIMIT_DIFFERENTIAL_SEQUENCES");
  return text != nullptr ? std::max(1, std::atoi(text)) : 10'000;
}();
constexpr int in_flight = 64;

using test::pick;

/// Periods that exercise exact arithmetic: tiny, odd, prime, and long.
std::int64_t random_period(std::mt19937_64& random) {
  static const std::int64_t periods[] = {
      1,         7,         1'000,      2'500,         7'919,         250'000,
      1'000'000, 3'000'000, 60'000'000, 3'600'000'000, 86'400'000'000};
  return pick(random, 0, 3) == 0 ? pick(random, 1, 10'000'000)
                                 : periods[pick(random, 0, std::size(periods) - 1)];
}

std::int64_t random_permits(std::mt19937_64& random, Algorithm algorithm) {
  switch (pick(random, 0, 5)) {
    case 0:
      return 1;
    case 1:
      return pick(random, 2, 10);
    case 2:
      return 7;
    case 3:
      return pick(random, 11, 1'000);
    default:
      return algorithm == Algorithm::sliding_window_log ? pick(random, 1, 100)
                                                        : pick(random, 1'000, 1'000'000);
  }
}

/// A random limit that the limiter accepts.
Limit random_limit(std::mt19937_64& random, Algorithm algorithm) {
  return test::first_valid_limit([&] {
    Limit limit{
        algorithm,
        {random_permits(random, algorithm), std::chrono::microseconds(random_period(random))},
        0,
        pick(random, 0, 1) == 0 ? Window::aligned : Window::anchored};
    if (pick(random, 0, 2) == 0) limit.burst = pick(random, 1, 3 * limit.rate.permits);
    return limit;
  });
}

/// acquire runs what RedisBackend::decide picks (a lean script for a single limit that has
/// one); acquire_by_decide always runs the general decide script.
enum class Kind {
  acquire,
  acquire_by_decide,
  peek,
  reserve,
  cancel,
  renew,
  confirm,
  change_policy,
  reset,
  refund,
  give_back,
  penalize,
  block
};

/// The owner lease of the differential's client: short, so that sequences register, renew,
/// let lapse and reclaim reservations (an owner that stops renewing is one that died).
constexpr std::int64_t lease_us = 1000;

struct Step {
  std::int64_t now;
  std::int64_t permits;
  Kind kind;
  std::int64_t max_wait_us = 0;  ///< reserve
  std::size_t reservation = 0;   ///< cancel, renew, claim: which earlier granted reservation
  /// confirm: asked at the wake (confirm), or while waiting (locate)
  ReservationOperation look = ReservationOperation::confirm;
  std::int64_t block_us = 0;     ///< block: the duration
  std::int64_t taken_at_us = 0;  ///< give_back: the time of the take (an earlier step's)
  std::shared_ptr<const CompiledPolicy> policy{};  ///< change_policy (with its epoch)
};

struct Sequence {
  std::shared_ptr<const CompiledPolicy> policy;
  std::string key;
  std::vector<Step> steps;
};

bool reservable(const std::vector<Algorithm>& algorithms) {
  return algorithms.size() == 1 && can_reserve(algorithms.front());
}

/// A sequence of requests on one key: times mostly move forward (by less than, about, and more
/// than a period), sometimes stand still, and sometimes step backwards.
Sequence random_sequence(std::mt19937_64& random, std::vector<Algorithm> algorithms, int index) {
  Policy policy;
  for (Algorithm algorithm : algorithms)
    policy.limits.push_back(random_limit(random, algorithm));
  Sequence sequence{CompiledPolicy::compile(policy), "diff-" + std::to_string(index), {}};
  const bool reservations = reservable(algorithms);
  int reserves = 0;
  std::int64_t capacity = INT64_MAX;
  std::int64_t period = INT64_MAX;
  for (const auto& limit : sequence.policy->limits()) {
    capacity = std::min(capacity, limit.capacity);
    period = std::min(period, limit.limit.rate.period.count());
  }
  std::int64_t now = 1'795'000'000'000'000 + pick(random, 0, 100'000'000'000);
  test::EpochDraws draws = test::random_draws(random);
  const int length = static_cast<int>(pick(random, 1, 12));
  for (int i = 0; i < length; ++i) {
    switch (pick(random, 0, 7)) {
      case 0:
        break;  // the same microsecond
      case 1:
        // The clock steps backwards: within a period, or by up to an hour (far beyond any
        // state's horizon).
        now -= pick(random, 0, 3) == 0
                   ? pick(random, period, std::max<std::int64_t>(period, 3'600'000'000))
                   : pick(random, 1, period);
        break;
      case 2:
        now += pick(random, period, 3 * period);
        break;
      default:
        now += pick(random, 0,
                    std::max<std::int64_t>(1, period / std::max<std::int64_t>(1, capacity)) * 3);
    }
    std::int64_t permits = 1;
    switch (pick(random, 0, 5)) {
      case 0:
        permits = pick(random, 1, std::min<std::int64_t>(capacity, 50));
        break;
      case 1:
        permits = std::max<std::int64_t>(1, std::min<std::int64_t>(capacity, 10'000) / 2);
        break;
      case 2:
        permits = std::min<std::int64_t>(capacity, 10'000);  // drain it in one go
        break;
      default:
        break;
    }
    Step step{now, permits, pick(random, 0, 9) == 0 ? Kind::peek : Kind::acquire};
    if (step.kind == Kind::acquire && algorithms.size() == 1 && pick(random, 0, 3) == 0) {
      step.kind = Kind::acquire_by_decide;
    }
    const auto roll = pick(random, 0, 19);
    if (roll == 0) {
      // A new policy of the same algorithms (or the same one again): the state carries over,
      // from `since`, as the carry says. A version older than one a key was written under is
      // refused as stale; 0 never is.
      Policy next;
      for (Algorithm algorithm : algorithms)
        next.limits.push_back(random_limit(random, algorithm));
      // Why more often without a store: set_policy() of the same policy with a reset.
      if (pick(random, 0, draws.fixed ? 1 : 4) == 0) next = sequence.policy->policy();
      step.kind = Kind::change_policy;
      step.policy = CompiledPolicy::compile(next, test::random_epoch(random, now, period, draws));
    } else if (roll == 1) {
      step.kind = Kind::reset;  // the key starts again: reservations made before are void
    } else if (reservations && roll < 10) {
      step.kind = Kind::reserve;
      step.max_wait_us = pick(random, 0, 3) == 0 ? 0 : pick(random, 1, 4 * period);
      ++reserves;
    } else if (reservations && roll < 14 && reserves > 0) {
      step.kind = Kind::cancel;
      step.reservation = static_cast<std::size_t>(pick(random, 0, reserves - 1));
    } else if (reservations && roll < 17 && reserves > 0) {
      step.kind = roll < 16 ? Kind::renew : Kind::confirm;
      step.reservation = static_cast<std::size_t>(pick(random, 0, reserves - 1));
      if (step.kind == Kind::confirm && pick(random, 0, 1) == 0)
        step.look = ReservationOperation::locate;
    }
    if ((step.kind == Kind::acquire || step.kind == Kind::peek) && pick(random, 0, 5) == 0) {
      static constexpr Kind adjustments[] = {Kind::refund, Kind::give_back, Kind::penalize,
                                             Kind::block};
      step.kind = adjustments[pick(random, 0, 3)];
      step.taken_at_us = sequence.steps.empty()
                             ? now
                             : sequence.steps[pick(random, 0, sequence.steps.size() - 1)].now;
      step.block_us =
          pick(random, 0, 2) == 0 ? pick(random, 1, 1'000) : pick(random, 1, 2 * period);
    }
    sequence.steps.push_back(step);
  }
  return sequence;
}

using test::describe;
using test::stored_log;
using test::stored_value;

/// A confirm's answer, as the differential compares it: whether the lease was held, where
/// the reservation stands, and its slot there.
std::string confirm_text(bool lease_held, const StandingOutcome& where) {
  return "held " + std::to_string(lease_held) + ", standing " +
         std::to_string(static_cast<int>(where.standing)) + " at " + std::to_string(where.slot.us) +
         "+" + std::to_string(where.slot.frac) + " counting " + std::to_string(where.cancels) +
         " cancels";
}

const char* kind_name(Kind kind) {
  static const char* const kinds[] = {
      "acquire",   "acquire by decide", "peek",   "reserve", "cancel",
      "renew",     "confirm",           "policy", "reset",   "refund",
      "give back", "penalize",          "block"};
  return kinds[static_cast<int>(kind)];
}

std::string describe(const Sequence& sequence, std::size_t upto) {
  std::ostringstream out;
  for (const auto& limit : sequence.policy->limits()) {
    out << "  " << limit.description << " burst " << limit.limit.burst << " window "
        << (limit.limit.window == Window::anchored ? "anchored" : "aligned") << "\n";
  }
  for (std::size_t i = 0; i <= upto && i < sequence.steps.size(); ++i) {
    const Step& step = sequence.steps[i];
    out << "  step " << i << ": now " << step.now << " permits " << step.permits << " "
        << kind_name(step.kind);
    if (step.kind == Kind::reserve) out << " max_wait " << step.max_wait_us;
    if (step.kind == Kind::block) out << " for " << step.block_us << "us";
    if (step.kind == Kind::give_back) out << " taken at " << step.taken_at_us;
    if (step.kind == Kind::cancel || step.kind == Kind::renew || step.kind == Kind::confirm)
      out << " reservation " << step.reservation;
    if (step.kind == Kind::change_policy) {
      for (const auto& limit : step.policy->limits())
        out << " " << limit.description << " burst " << limit.spec.c;
      const PolicyEpoch& epoch = step.policy->epoch();
      out << " version " << epoch.version << " since " << epoch.since_us << " carry "
          << static_cast<int>(epoch.carry);
    }
    out << "\n";
  }
  return out.str();
}

struct Tally {
  int decisions = 0;
  int mismatches = 0;
  int allowed = 0;
  int lean = 0;                  ///< decisions made by a lean script
  std::array<int, 4> cancels{};  ///< by CancelVerdict: returned, due, refused, already returned
  int reclaimed = 0;             ///< lapsed reservations the model gave back
  int renewed = 0;               ///< renewals of a reservation still held
  int located_moved = 0;         ///< asks while waiting that found a reservation moved
  int stale = 0;                 ///< requests refused as stale (a newer policy version stored)
  int adjusted = 0;              ///< refunds, penalties and blocks applied
  int adjust_refused = 0;        ///< ... refused by a limit (nothing written)
};

struct Granted {
  Reservation reservation;
  std::int64_t permits;
  /// The policy it was reserved under: acquire() cancels with it, whatever the limiter's
  /// policy is by then.
  std::shared_ptr<const CompiledPolicy> policy;
};

std::string describe(const ReservationBook& book) {
  return "book " + std::to_string(book.version) + "/" + std::to_string(book.cancels) + "/" +
         std::to_string(book.epoch);
}

void report(Tally* tally, const Sequence& sequence, std::size_t step, const std::string& what) {
  if (++tally->mismatches <= 5) {
    ADD_FAILURE() << "script and model disagree at step " << step << "\n"
                  << describe(sequence, step) << what;
  }
}

/// Compares every limit's stored value with the model's state.
Task<void> compare_stored(Client& client, const Sequence& sequence, std::size_t step,
                          const std::vector<std::optional<LimitState>>& states,
                          std::string key_base, Tally* tally) {
  const auto& limits = sequence.policy->limits();
  for (std::size_t i = 0; i < limits.size() && i < states.size(); ++i) {
    const std::string key = key_base + limits[i].key_suffix;
    std::optional<std::string> model;
    std::optional<std::string> script;
    if (limits[i].limit.algorithm == Algorithm::sliding_window_log) {
      const Reply reply = co_await client.command("ZRANGE", key, "0", "-1", "WITHSCORES");
      if (states[i]) model = stored_log(*states[i]);
      script = stored_log(reply);
    } else {
      const Reply reply = co_await client.command("GET", key);
      if (states[i]) model = stored_value(*states[i]);
      if (!reply.is_nil()) script = reply.as_string();
    }
    if (model != script) {
      report(tally, sequence, step,
             "  stored value of limit " + std::to_string(i) + ": script " +
                 script.value_or("(none)") + ", model " + model.value_or("(none)"));
    }
  }
}

/// A block as long as every limit of `policy` can hold (Limiter::block() checks it before any
/// I/O): a sliding_window_log's at most its window, a token_bucket's debt at most what its level
/// holds exactly.
std::int64_t blockable(const CompiledPolicy& policy, std::int64_t duration_us) {
  for (const LimitSpec& spec : policy.specs()) {
    if (spec.algorithm == Algorithm::sliding_window_log)
      duration_us = std::min(duration_us, spec.b);
    if (spec.algorithm == Algorithm::token_bucket)
      duration_us = std::min(duration_us, (max_exact - spec.c * spec.b + spec.b) / spec.a);
  }
  return duration_us;
}

/// Runs the step's refund, penalty or block in the script and the model, and compares what
/// they answer and store.
Task<void> compare_adjustment(Client& client, RedisBackend& backend, const Sequence& sequence,
                              std::size_t index, std::vector<std::optional<LimitState>>& states,
                              std::optional<std::int64_t> reset_at, const std::string& key_base,
                              Tally* tally) {
  const Step& step = sequence.steps[index];
  const Adjustment adjustment = step.kind == Kind::refund      ? Adjustment::refund
                                : step.kind == Kind::give_back ? Adjustment::give_back
                                : step.kind == Kind::penalize  ? Adjustment::penalize
                                                               : Adjustment::block;
  const std::int64_t amount =
      adjustment == Adjustment::block ? blockable(*sequence.policy, step.block_us) : step.permits;
  if (amount < 1) co_return;  // no block this policy can hold
  const DecideRequest request(sequence.policy, KeyBase(key_base), Operation::acquire, 1, step.now);
  AdjustOutcome script;
  try {
    script = co_await backend.adjust(request, adjustment, amount, step.taken_at_us);
  } catch (const StalePolicy& stale) {
    script.stale_version = stale.stored_version();
  }
  const AdjustOutcome model =
      adjust_policy(sequence.policy->specs(), states, step.now, adjustment, amount,
                    sequence.policy->change(), step.taken_at_us, reset_at);
  ++tally->decisions;
  if (model.stale_version != 0) ++tally->stale;
  tally->adjusted += model.applied ? 1 : 0;
  tally->adjust_refused += !model.applied && model.stale_version == 0 ? 1 : 0;
  const bool same =
      script.applied == model.applied && script.stale_version == model.stale_version &&
      (!model.applied || script.now_us == model.now_us) &&
      (model.applied || model.stale_version != 0 || script.refused_limit == model.refused_limit);
  if (!same) {
    report(tally, sequence, index,
           std::string("  ") + adjustment_name(adjustment) + " of " + std::to_string(amount) +
               ": script {applied " + std::to_string(script.applied) + ", stale " +
               std::to_string(script.stale_version) + ", refused by " +
               std::to_string(script.refused_limit) + " '" + script.refusal +
               "'}\n  model  {applied " + std::to_string(model.applied) + ", stale " +
               std::to_string(model.stale_version) + ", refused by " +
               std::to_string(model.refused_limit) + "}");
  }
  co_await compare_stored(client, sequence, index, states, key_base, tally);
}

Task<void> run_sequence(Client& client, RedisBackend& backend, Sequence sequence, Tally* tally) {
  std::vector<std::optional<LimitState>> states(sequence.policy->specs().size());
  std::vector<Granted> granted;
  HeldReservations held;                 // the model's owner leases of the key
  std::optional<std::int64_t> reset_at;  // the time of the key's latest reset, once marked
  const std::string key_base = "{" + sequence.key + "}";
  for (std::size_t i = 0; i < sequence.steps.size(); ++i) {
    Step& step = sequence.steps[i];
    if (step.kind == Kind::change_policy) {
      sequence.policy = step.policy;
      continue;
    }
    if (step.kind == Kind::reset) {
      co_await backend.reset(sequence.policy, key_base, step.now);
      // The reset's mark, kept while any of its keys would have lived (none expires in a
      // sequence: injected times keep keys an hour longer).
      const bool held_state =
          reset_at || !held.empty() ||
          std::ranges::any_of(states, [](const auto& state) { return state.has_value(); });
      if (held_state) reset_at = step.now;
      for (auto& state : states)
        state.reset();
      held.clear();
      continue;
    }
    // The reserve, cancel and renew calls first give back the lapsed reservations.
    const auto reclaim_in_model = [&] {
      if (step.kind != Kind::reserve && step.kind != Kind::cancel && step.kind != Kind::renew)
        return;
      tally->reclaimed += static_cast<int>(reclaim_expired(
          sequence.policy->specs().front(), states[0], held, step.now, sequence.policy->change()));
    };
    if (step.kind == Kind::renew || step.kind == Kind::confirm) {
      if (step.reservation >= granted.size()) continue;
      const Reservation& reserved = granted[step.reservation].reservation;
      const std::int64_t version = reserved.book.version;
      const DecideRequest request(sequence.policy, KeyBase(key_base), Operation::acquire, 1,
                                  step.now);
      std::string script;
      std::string model;
      if (step.kind == Kind::renew) {
        const ReservationReply renewal = co_await backend.run_reservation(
            ReservationOperation::renew, request, ticket_of(reserved));
        script = std::to_string(renewal.lease_expiry_us);
        reclaim_in_model();
        const std::int64_t renewed = renew_lease(held, version, step.now, lease_us);
        model = std::to_string(renewed);
        tally->renewed += renewed != 0 ? 1 : 0;
      } else {
        const ReservationReply check =
            co_await backend.run_reservation(step.look, request, ticket_of(reserved));
        script = confirm_text(check.lease_held, check.where);
        // Why only at the wake: asked while waiting, the registration stays.
        const bool held_before =
            step.look == ReservationOperation::confirm && claim_lease(held, version);
        if (step.look == ReservationOperation::locate &&
            check.where.standing == ReservationStanding::moved) {
          ++tally->located_moved;
        }
        model = confirm_text(held_before, reservation_standing(states[0], ticket_of(reserved)));
      }
      ++tally->decisions;
      if (script != model) {
        report(tally, sequence, i,
               std::string(step.kind == Kind::renew ? "  renew" : "  confirm") + ": script " +
                   script + ", model " + model);
      }
      co_await compare_stored(client, sequence, i, states, key_base, tally);
      continue;
    }
    // The limiter never sends more permits than every limit holds (it checks before any I/O).
    for (const auto& limit : sequence.policy->limits()) {
      step.permits = std::min(step.permits, limit.capacity);
    }
    if (step.kind == Kind::refund || step.kind == Kind::give_back || step.kind == Kind::penalize ||
        step.kind == Kind::block) {
      co_await compare_adjustment(client, backend, sequence, i, states, reset_at, key_base, tally);
      continue;
    }
    if (step.kind == Kind::reserve) {
      const LimitSpec& spec = sequence.policy->specs().front();
      Reservation script;
      std::int64_t script_stale = 0;
      try {
        script = co_await backend.reserve(DecideRequest(sequence.policy, KeyBase(key_base),
                                                        Operation::acquire, step.permits, step.now),
                                          step.max_wait_us);
      } catch (const StalePolicy& stale) {
        script_stale = stale.stored_version();
      }
      reclaim_in_model();
      const ReserveOutcome model = reserve(spec, states[0], step.now, step.permits,
                                           step.max_wait_us, sequence.policy->change());
      const std::int64_t expiry =
          model.decision.stale_version == 0
              ? register_lease(held, spec, model, step.now, step.permits, lease_us)
              : 0;
      ++tally->decisions;
      if (script_stale != 0 || model.decision.stale_version != 0) {
        ++tally->stale;
        if (script_stale != model.decision.stale_version) {
          report(tally, sequence, i,
                 "  reserve refused as stale: script " + std::to_string(script_stale) + ", model " +
                     std::to_string(model.decision.stale_version));
        }
        co_await compare_stored(client, sequence, i, states, key_base, tally);
        continue;
      }
      const bool same = script.decision.allowed == model.decision.allowed &&
                        script.decision.remaining == model.decision.remaining &&
                        script.decision.retry_after.count() == model.decision.retry_after_us &&
                        script.decision.reset_after.count() == model.decision.reset_after_us &&
                        script.wait_us == model.wait_us && script.slot == model.slot &&
                        script.book == model.book && script.lease_expiry_us == expiry;
      if (!same) {
        std::ostringstream what;
        what << "  reserve: script {allowed " << script.decision.allowed << ", remaining "
             << script.decision.remaining << ", retry " << script.decision.retry_after.count()
             << ", reset " << script.decision.reset_after.count() << ", wait " << script.wait_us
             << ", slot " << script.slot.us << "+" << script.slot.frac << ", "
             << describe(script.book) << ", lease " << script.lease_expiry_us
             << "}\n  model  {allowed " << model.decision.allowed << ", remaining "
             << model.decision.remaining << ", retry " << model.decision.retry_after_us
             << ", reset " << model.decision.reset_after_us << ", wait " << model.wait_us
             << ", slot " << model.slot.us << "+" << model.slot.frac << ", " << describe(model.book)
             << ", lease " << expiry << "}";
        report(tally, sequence, i, what.str());
      }
      if (script.decision.allowed) granted.push_back({script, step.permits, sequence.policy});
      co_await compare_stored(client, sequence, i, states, key_base, tally);
      continue;
    }
    if (step.kind == Kind::cancel) {
      // Why a reservation may be cancelled again: the second cancel must change nothing.
      if (step.reservation >= granted.size()) continue;
      const Granted& target = granted[step.reservation];
      const CancelTicket ticket{.slot = target.reservation.slot,
                                .den = target.reservation.den,
                                .d = target.reservation.d,
                                .version = target.reservation.book.version,
                                .epoch = target.reservation.book.epoch,
                                .cancels_before = target.reservation.book.cancels};
      // As acquire() gives it back: under the policy in force (same algorithm, same key).
      CancelVerdict script = CancelVerdict::refused;
      std::int64_t script_stale = 0;
      try {
        const DecideRequest cancel(sequence.policy, KeyBase(key_base), Operation::acquire,
                                   target.permits, step.now);
        const ReservationReply reply =
            co_await backend.run_reservation(ReservationOperation::cancel, cancel, ticket);
        script = reply.verdict;
      } catch (const StalePolicy& stale) {
        script_stale = stale.stored_version();
      }
      reclaim_in_model();
      const CancelOutcome model =
          cancel_reservation(sequence.policy->specs().front(), states[0], step.now, target.permits,
                             ticket, sequence.policy->change());
      if (model.stale_version == 0) held.erase(ticket.version);  // the cancel ends its lease
      ++tally->decisions;
      co_await compare_stored(client, sequence, i, states, key_base, tally);
      if (script_stale != 0 || model.stale_version != 0) {
        ++tally->stale;
        if (script_stale != model.stale_version) {
          report(tally, sequence, i,
                 "  cancel refused as stale: script " + std::to_string(script_stale) + ", model " +
                     std::to_string(model.stale_version));
        }
        continue;
      }
      ++tally->cancels[static_cast<int>(model.verdict)];
      if (script != model.verdict) {
        report(tally, sequence, i,
               "  cancel: script " + std::to_string(static_cast<int>(script)) + ", model " +
                   std::to_string(static_cast<int>(model.verdict)) + " (0 returned, 1 due, " +
                   "2 refused, 3 already returned)");
      }
      continue;
    }
    const Operation operation = step.kind == Kind::peek ? Operation::peek : Operation::acquire;
    DecideRequest request(sequence.policy, KeyBase(key_base), operation, step.permits, step.now);
    Decision script;
    std::int64_t script_stale = 0;
    try {
      if (step.kind == Kind::acquire_by_decide) {
        script = co_await backend.decide_with_general_script(request);
      } else {
        tally->lean += lean_decide_script(request) != nullptr ? 1 : 0;
        script = co_await backend.decide(request);
      }
    } catch (const StalePolicy& stale) {
      script_stale = stale.stored_version();
    }
    const PolicyOutcome model = decide_policy(
        sequence.policy->specs(), states, step.now, step.permits,
        step.kind == Kind::peek ? Mode::peek : Mode::acquire, sequence.policy->change());
    ++tally->decisions;
    co_await compare_stored(client, sequence, i, states, key_base, tally);
    if (script_stale != 0 || model.stale_version != 0) {
      ++tally->stale;
      if (script_stale != model.stale_version) {
        report(tally, sequence, i,
               "  refused as stale: script " + std::to_string(script_stale) + ", model " +
                   std::to_string(model.stale_version));
      }
      continue;
    }
    const LimitOutcome& bound = model.binding_outcome();
    tally->allowed += script.allowed ? 1 : 0;
    const bool same = script.allowed == model.allowed && script.limit == bound.limit &&
                      script.remaining == bound.remaining &&
                      script.retry_after.count() == bound.retry_after_us &&
                      script.reset_after.count() == bound.reset_after_us &&
                      script.server_time_us == model.now_us && script.binding == model.binding;
    if (!same) {
      Decision expected;
      expected.allowed = model.allowed;
      expected.limit = bound.limit;
      expected.remaining = bound.remaining;
      expected.retry_after = std::chrono::microseconds(bound.retry_after_us);
      expected.reset_after = std::chrono::microseconds(bound.reset_after_us);
      expected.server_time_us = model.now_us;
      expected.binding = model.binding;
      report(tally, sequence, i,
             "  script " + describe(script) + "\n  model  " + describe(expected));
    }
  }
}

Task<void> run_case(Client& client, std::vector<Algorithm> algorithms, std::uint64_t seed,
                    Tally* tally) {
  RedisBackend backend(client.dispatcher(), std::chrono::microseconds(lease_us));
  std::mt19937_64 random(seed);
  TaskGroup group;
  for (int index = 0; index < sequences_per_case; ++index) {
    Sequence sequence = random_sequence(random, algorithms, index);
    group.add(run_sequence(client, backend, std::move(sequence), tally));
    // Keep a bounded number in flight: wait for the batch every `in_flight` sequences.
    if (group.running() >= in_flight) co_await group.join();
  }
  co_await group.join();
}

struct Case {
  const char* name;
  std::vector<Algorithm> algorithms;
  bool lean = false;  ///< its acquires run a lean script
};

class Differential : public test::LoopTest, public ::testing::WithParamInterface<Case> {
 protected:
  test::RedisServer server_;
};

TEST_P(Differential, ScriptAndModelDecideIdenticallyOnTenThousandRandomSequences) {
  const std::uint64_t seed = 20261122 + std::hash<std::string>{}(GetParam().name) % 1000;
  ClientOptions options;
  options.url = server_.url();
  options.command_timeout = 10s;
  options.reservation_lease = 0ms;  // the backend is given its own 1 ms leases
  Client client(loop(), options);
  Tally tally;
  run(loop(), run_case(client, GetParam().algorithms, seed, &tally));
  run(loop(), client.close());
  EXPECT_EQ(tally.mismatches, 0) << "seed " << seed;
  EXPECT_TRUE(server_.keys_without_ttl().empty()) << "a key without TTL was left";
  EXPECT_GE(tally.decisions, sequences_per_case);
  EXPECT_GT(tally.allowed, 0);
  EXPECT_LT(tally.allowed, tally.decisions) << "sequences must also reach denials";
  EXPECT_EQ(tally.lean > 0, GetParam().lean) << tally.lean << " decisions by a lean script";
  EXPECT_GT(tally.adjusted, 0) << "sequences must also refund, penalize and block";
  if (reservable(GetParam().algorithms)) {
    for (const int count : tally.cancels)
      EXPECT_GT(count, 0) << "cancellations must be returned, due and refused";
    EXPECT_GT(tally.located_moved, 0) << "asks while waiting must also find reservations moved";
  }
  // Why only with a bucket: stamps on the window algorithms come with their own carry.
  const auto& algorithms = GetParam().algorithms;
  if (std::any_of(algorithms.begin(), algorithms.end(), can_reserve)) {
    EXPECT_GT(tally.stale, 0) << "sequences must also reach stale refusals";
  }
  std::printf(
      "[ %-22s ] %d decisions, %d allowed, %d by a lean script, cancels %d returned %d due "
      "%d refused %d already returned, %d reclaimed, %d renewed, %d located moved, %d stale, %d "
      "adjusted, %d adjustments refused, seed %llu\n",
      GetParam().name, tally.decisions, tally.allowed, tally.lean, tally.cancels[0],
      tally.cancels[1], tally.cancels[2], tally.cancels[3], tally.reclaimed, tally.renewed,
      tally.located_moved, tally.stale, tally.adjusted, tally.adjust_refused,
      static_cast<unsigned long long>(seed));
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, Differential,
    ::testing::Values(
        Case{"gcra", {Algorithm::gcra}, true},
        Case{"token_bucket", {Algorithm::token_bucket}, true},
        Case{"leaky_bucket", {Algorithm::leaky_bucket}, true},
        Case{"fixed_window", {Algorithm::fixed_window}, true},
        Case{"sliding_window_log", {Algorithm::sliding_window_log}, true},
        Case{"sliding_window_counter", {Algorithm::sliding_window_counter}, true},
        Case{"multi_limit",
             {Algorithm::gcra, Algorithm::fixed_window, Algorithm::sliding_window_counter}},
        Case{"multi_limit_buckets",
             {Algorithm::token_bucket, Algorithm::leaky_bucket, Algorithm::sliding_window_log}}),
    [](const auto& info) { return std::string(info.param.name); });

/// A window sequence whose policy changes often, each change with a newer version, a time at or
/// before the step that follows it, and a random carry; or, in one sequence in four, by
/// limiters that follow no store (test::fixed_epoch: mostly resets, some with a since after the
/// step). The scripts carry stored windows over as the models do.
Sequence window_carry_sequence(std::mt19937_64& random, Algorithm algorithm, int index) {
  Sequence sequence = random_sequence(random, {algorithm}, index);
  std::vector<Step> steps;
  test::EpochDraws draws = test::random_draws(random);
  draws.version = pick(random, 0, 1);
  const auto epoch = [&](std::int64_t now, std::int64_t period) {
    if (draws.fixed) return test::fixed_epoch(random, now, period, draws);
    draws.version += pick(random, 0, 1);
    return PolicyEpoch{draws.version,
                       pick(random, 0, 3) == 0 ? 0 : now - pick(random, 0, 2 * period),
                       static_cast<Carry>(pick(random, 0, 2))};
  };
  const auto period = [](const CompiledPolicy& policy) {
    return policy.limits().front().limit.rate.period.count();
  };
  sequence.policy = CompiledPolicy::compile(
      sequence.policy->policy(), epoch(sequence.steps.front().now, period(*sequence.policy)));
  Policy current = sequence.policy->policy();
  for (Step step : sequence.steps) {
    if (step.kind == Kind::change_policy) {
      current = step.policy->policy();
    } else if (pick(random, 0, 2) == 0) {
      // Why the same policy often without a store: set_policy() of it with a reset.
      if (!draws.fixed || pick(random, 0, 1) == 0)
        current = Policy::of(random_limit(random, algorithm));
      Step change{step.now, 1, Kind::change_policy};
      change.policy = CompiledPolicy::compile(current);
      steps.push_back(change);
    }
    steps.push_back(step);
  }
  for (Step& step : steps) {
    if (step.kind != Kind::change_policy) continue;
    step.policy =
        CompiledPolicy::compile(step.policy->policy(), epoch(step.now, period(*step.policy)));
  }
  sequence.steps = std::move(steps);
  return sequence;
}

Task<void> run_window_carry_case(Client& client, Algorithm algorithm, std::uint64_t seed,
                                 Tally* tally) {
  RedisBackend backend(client.dispatcher(), std::chrono::microseconds(lease_us));
  std::mt19937_64 random(seed);
  TaskGroup group;
  for (int index = 0; index < sequences_per_case; ++index) {
    group.add(
        run_sequence(client, backend, window_carry_sequence(random, algorithm, index), tally));
    if (group.running() >= in_flight) co_await group.join();
  }
  co_await group.join();
}

class WindowCarryDifferential : public test::LoopTest,
                                public ::testing::WithParamInterface<Algorithm> {
 protected:
  test::RedisServer server_;
};

TEST_P(WindowCarryDifferential, ScriptAndModelCarryWindowsOverPolicyChangesIdentically) {
  const std::uint64_t seed = 20261124 + static_cast<std::uint64_t>(GetParam());
  ClientOptions options;
  options.url = server_.url();
  options.command_timeout = 10s;
  options.reservation_lease = 0ms;  // the backend is given its own 1 ms leases
  Client client(loop(), options);
  Tally tally;
  run(loop(), run_window_carry_case(client, GetParam(), seed, &tally));
  run(loop(), client.close());
  EXPECT_EQ(tally.mismatches, 0) << "seed " << seed;
  EXPECT_TRUE(server_.keys_without_ttl().empty()) << "a key without TTL was left";
  EXPECT_LT(tally.allowed, tally.decisions) << "sequences must also reach denials";
  std::printf("[ %-22s ] %d decisions, %d allowed across policy changes, seed %llu\n",
              std::string(to_string(GetParam())).c_str(), tally.decisions, tally.allowed,
              static_cast<unsigned long long>(seed));
}

INSTANTIATE_TEST_SUITE_P(Windows, WindowCarryDifferential,
                         ::testing::Values(Algorithm::fixed_window, Algorithm::sliding_window_log,
                                           Algorithm::sliding_window_counter),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// ---- The in-process backend against Redis

/// How long Redis keeps a key a script wrote, on the sequences' injected clock. A script run
/// at an injected time writes PX ms + an hour (lua/lib/now.lua: Redis expires keys on its own
/// clock), so the test reads ms back (PTTL, less the milliseconds Redis's clock moved on from
/// before the script to after the read) and drops the key itself once Redis would have: Redis
/// keeps a key while its clock's millisecond is at most the write's millisecond + PX.
struct KeyLifetime {
  std::int64_t written_ms = 0;  ///< the injected time of the write, in whole milliseconds
  std::int64_t px_low = 0;      ///< the TTL the script wrote, at least and at most (ms)
  std::int64_t px_high = 0;
  /// The first microsecond Redis no longer holds the key, at the earliest and at the latest.
  std::int64_t gone_low() const { return (written_ms + px_low + 1) * 1000; }
  std::int64_t gone_high() const { return (written_ms + px_high + 1) * 1000; }
};

/// The TTL the test gives every key before a step: a key that still has it after the step was
/// not written by it (every write sets its key's TTL).
constexpr std::int64_t untouched_ms = 1'000'000'000'000'000;
constexpr std::int64_t injected_extra_ms = 3'600'000;

struct LocalTally {
  int steps = 0;
  int mismatches = 0;
  int expired = 0;    ///< keys the test dropped as Redis would have
  int cut = 0;        ///< sequences ended where Redis's TTL was not known to the millisecond
  int converted = 0;  ///< policy changes
};

/// One step's answer, as text both backends must agree on (the decision's fields but its Redis
/// time; an adjustment's outcome; a stale refusal).
Task<std::string> local_step(Backend& backend, RedisBackend* redis, const Step& step,
                             const std::shared_ptr<const CompiledPolicy>& policy,
                             const std::string& key_base) {
  std::string out;
  std::exception_ptr error;
  try {
    if (step.kind == Kind::acquire || step.kind == Kind::acquire_by_decide ||
        step.kind == Kind::peek) {
      const DecideRequest request(policy, KeyBase(key_base),
                                  step.kind == Kind::peek ? Operation::peek : Operation::acquire,
                                  step.permits, step.now);
      Decision decision;
      // Why not one conditional expression: g++ 12 mishandles a co_await inside one.
      if (redis != nullptr && step.kind == Kind::acquire_by_decide) {
        decision = co_await redis->decide_with_general_script(request);
      } else {
        decision = co_await backend.decide(request);
      }
      decision.server_time_us = 0;  // 0 in process
      out = test::describe(decision);
    } else {
      const Adjustment adjustment = step.kind == Kind::refund      ? Adjustment::refund
                                    : step.kind == Kind::give_back ? Adjustment::give_back
                                    : step.kind == Kind::penalize  ? Adjustment::penalize
                                                                   : Adjustment::block;
      const std::int64_t amount =
          adjustment == Adjustment::block ? blockable(*policy, step.block_us) : step.permits;
      if (amount < 1) co_return "no block";
      const DecideRequest request(policy, KeyBase(key_base), Operation::acquire, 1, step.now);
      const AdjustOutcome outcome =
          co_await backend.adjust(request, adjustment, amount, step.taken_at_us);
      out = std::string(adjustment_name(adjustment)) + " applied " +
            std::to_string(outcome.applied) + " refused by " +
            std::to_string(outcome.refused_limit);
    }
  } catch (const StalePolicy& stale) {
    out = "stale " + std::to_string(stale.stored_version());
  } catch (...) {
    error = std::current_exception();
  }
  if (error) std::rethrow_exception(error);
  co_return out;
}

/// A sequence of takes, peeks, refunds, give-backs, penalties, blocks and policy changes (every
/// carry; set_policy()'s epochs and a store's) on one key, mostly a fraction of a millisecond to
/// a few milliseconds apart, so that steps often come just after a key stopped mattering: a
/// refund often leaves it exactly full, and a change often follows.
Sequence local_sequence(std::mt19937_64& random, const std::vector<Algorithm>& algorithms,
                        int index) {
  Sequence sequence = random_sequence(random, algorithms, index);
  sequence.key = "local-" + std::to_string(index);
  test::EpochDraws draws = test::random_draws(random);
  std::shared_ptr<const CompiledPolicy> policy = sequence.policy;
  std::vector<Step> steps;
  std::int64_t now = sequence.steps.front().now;
  for (Step step : sequence.steps) {
    switch (pick(random, 0, 5)) {
      case 0:
        break;
      case 1:
        now += pick(random, 1, 100);
        break;
      case 2:
        now -= pick(random, 1, 1'000);
        break;
      default:
        now += pick(random, 100, 2'500);
    }
    step.now = now;
    step.taken_at_us = steps.empty() ? now : steps[pick(random, 0, steps.size() - 1)].now;
    // Why no reservations (they become refunds): in process no owner lease is kept (renew,
    // confirm), and reservations have their own differentials (reserve_all_differential_test.cpp,
    // AcquireAllInProcessTest).
    if (step.kind == Kind::reserve || step.kind == Kind::cancel || step.kind == Kind::renew ||
        step.kind == Kind::confirm || step.kind == Kind::reset) {
      step.kind = Kind::refund;
    }
    if (step.kind == Kind::change_policy || pick(random, 0, 3) == 0) {
      Policy next;
      for (Algorithm algorithm : algorithms)
        next.limits.push_back(random_limit(random, algorithm));
      if (pick(random, 0, 2) == 0) next = policy->policy();
      const std::int64_t period = policy->limits().front().limit.rate.period.count();
      policy = CompiledPolicy::compile(next, test::random_epoch(random, now, period, draws));
      Step change{now, 1, Kind::change_policy};
      change.policy = policy;
      steps.push_back(change);
      if (step.kind == Kind::change_policy) continue;
    }
    steps.push_back(step);
  }
  sequence.steps = std::move(steps);
  return sequence;
}

/// Redis's clock, in whole milliseconds.
Task<std::int64_t> redis_ms(Client& client) {
  const Reply time = co_await client.command("TIME");
  co_return std::stoll(time.as_array()[0].as_string()) * 1000 +
      std::stoll(time.as_array()[1].as_string()) / 1000;
}

Task<void> run_local_sequence(Client& client, RedisBackend& redis, Sequence sequence,
                              LocalTally* tally) {
  LocalBackend local;
  const std::string key_base = "{" + sequence.key + "}";
  std::map<std::string, KeyLifetime> held;  // the keys Redis holds, by name
  std::ostringstream log;
  for (std::size_t i = 0; i < sequence.steps.size(); ++i) {
    Step& step = sequence.steps[i];
    if (step.kind == Kind::change_policy) {
      sequence.policy = step.policy;
      ++tally->converted;
      log << "  " << step.now << " policy " << sequence.policy->limits().front().description
          << " version " << step.policy->epoch().version << " since "
          << step.policy->epoch().since_us << " carry "
          << static_cast<int>(step.policy->epoch().carry) << "\n";
      continue;
    }
    for (const auto& limit : sequence.policy->limits())
      step.permits = std::min(step.permits, limit.capacity);
    // Redis drops what it would have by now; a TTL not known well enough ends the sequence.
    bool known = true;
    for (auto it = held.begin(); it != held.end();) {
      if (step.now >= it->second.gone_high()) {
        co_await client.command("DEL", it->first);
        ++tally->expired;
        it = held.erase(it);
        continue;
      }
      known = known && step.now < it->second.gone_low();
      co_await client.command("PEXPIRE", it->first, std::to_string(untouched_ms));
      ++it;
    }
    if (!known) {
      ++tally->cut;
      co_return;
    }
    const std::int64_t before_ms = co_await redis_ms(client);
    const std::string script = co_await local_step(redis, &redis, step, sequence.policy, key_base);
    const std::string model = co_await local_step(local, nullptr, step, sequence.policy, key_base);
    std::map<std::string, std::int64_t> ttls;
    for (const auto& limit : sequence.policy->limits()) {
      const std::string key = key_base + limit.key_suffix;
      ttls[key] = (co_await client.command("PTTL", key)).as_integer();
    }
    // Redis's milliseconds from before the script to after the PTTLs: the TTL read is the one
    // written less at most that many.
    const std::int64_t slack_ms = co_await redis_ms(client) - before_ms;
    for (const auto& [key, pttl] : ttls) {
      if (pttl == -2) {
        held.erase(key);
      } else if (pttl < untouched_ms - injected_extra_ms) {
        const std::int64_t px = pttl - injected_extra_ms;
        held[key] = {step.now / 1000, px, px + slack_ms};
      }
    }
    ++tally->steps;
    log << "  " << step.now << " " << kind_name(step.kind) << " " << step.permits << ": " << script
        << "\n";
    if (script != model) {
      if (++tally->mismatches <= 5) {
        ADD_FAILURE() << "in process and Redis disagree at step " << i << " of " << sequence.key
                      << "\n"
                      << log.str() << "  in process: " << model;
      }
      co_return;
    }
  }
}

class LocalDifferential : public test::LoopTest, public ::testing::WithParamInterface<Case> {
 protected:
  test::RedisServer server_;
};

// Issue 33, bug 4: the in-process backend dropped a key as soon as its state stopped mattering,
// where Redis keeps it through the millisecond its TTL (whole milliseconds, at least 1) ends in:
// a policy change in that millisecond converted the key in Redis and found none in process.
TEST_P(LocalDifferential, TheInProcessBackendDecidesAsRedisOnRandomSequences) {
  const std::uint64_t seed = 20261130 + std::hash<std::string>{}(GetParam().name) % 1000;
  ClientOptions options;
  options.url = server_.url();
  options.command_timeout = 10s;
  Client client(loop(), options);
  RedisBackend redis(client.dispatcher());
  LocalTally tally;
  const int sequences = std::max(1, sequences_per_case / 25);
  std::mt19937_64 random(seed);
  // Why one at a time: the TTL read back is exact when no other call runs in between.
  for (int index = 0; index < sequences; ++index) {
    run(loop(), run_local_sequence(client, redis,
                                   local_sequence(random, GetParam().algorithms, index), &tally));
  }
  run(loop(), client.close());
  EXPECT_EQ(tally.mismatches, 0) << "seed " << seed;
  EXPECT_GE(tally.steps, sequences / 2) << "a sequence's first step is never cut";
  std::printf(
      "[ %-22s ] %d steps, %d policy changes, %d keys expired, %d sequences cut, seed "
      "%llu\n",
      GetParam().name, tally.steps, tally.converted, tally.expired, tally.cut,
      static_cast<unsigned long long>(seed));
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, LocalDifferential,
    ::testing::Values(
        Case{"gcra", {Algorithm::gcra}}, Case{"token_bucket", {Algorithm::token_bucket}},
        Case{"leaky_bucket", {Algorithm::leaky_bucket}},
        Case{"fixed_window", {Algorithm::fixed_window}},
        Case{"sliding_window_log", {Algorithm::sliding_window_log}},
        Case{"sliding_window_counter", {Algorithm::sliding_window_counter}},
        Case{"multi_limit",
             {Algorithm::gcra, Algorithm::fixed_window, Algorithm::sliding_window_counter}},
        Case{"multi_limit_buckets",
             {Algorithm::token_bucket, Algorithm::leaky_bucket, Algorithm::sliding_window_log}}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace redlimit::detail
