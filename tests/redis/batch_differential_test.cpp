// Coalesced script calls decide exactly as calls sent one by one, and as the C++ model. Random
// rounds of operations on a few keys (so that runs on one key land in one batch) run three
// ways: (a) each round's operations started together in one loop turn on a client with
// max_batch 64, so that they go as batches; (b) the same operations one by one, in the same
// order, on a client with max_batch 1, under another key prefix; (c) the model. Operations are
// acquires by the lean and the general scripts, peeks, reservations, their cancels and their
// owner leases' renewals and claims, refunds, give-backs and penalties, on every algorithm and
// on policies of several limits, at injected times; between rounds the policy changes (a new
// version, an older one the scripts refuse as stale, a since and a carry). Every field of every
// answer must agree, and after every round the two prefixes' stored values must be equal, and
// their TTLs too (but for the wall time between the two ways' writes). The EVALSHA count proves
// that (a) really sent batches. Each run draws a new seed (printed; REDLIMIT_SEED repeats it).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <sstream>
#include <variant>

#include "algorithms/policy_model.hpp"
#include "algorithms/reservation_leases.hpp"
#include "algorithms/reservations.hpp"
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
#include "support/valid_limit.hpp"

namespace redlimit::detail {
namespace {

using namespace std::chrono_literals;

constexpr int rounds_per_case = 64;
constexpr int keys_per_case = 3;
/// Owner leases of reservations (registered when a reservation waits longer): short ones lapse
/// and are reclaimed within a few operations; longer ones stay held, so that renewals and claims
/// find them.
constexpr std::int64_t short_lease_us = 1000;
constexpr std::int64_t long_lease_us = 100'000;

using test::pick;

/// A limit the limiter accepts, small enough that a round of 40 reaches denials.
/// A random limit of `algorithm`; `long_period`: one of the periods of 250 ms or more, whose
/// reservations wait longer than a short owner lease.
Limit random_limit(std::mt19937_64& random, Algorithm algorithm, bool long_period = false) {
  static const std::int64_t periods[] = {7, 1'000, 7'919, 250'000, 1'000'000, 60'000'000};
  return test::first_valid_limit([&] {
    const std::int64_t period = periods[pick(random, long_period ? 3 : 0, 5)];
    Limit limit{algorithm,
                {pick(random, 1, 20), std::chrono::microseconds(period)},
                0,
                pick(random, 0, 1) == 0 ? Window::aligned : Window::anchored};
    if (pick(random, 0, 2) == 0) limit.burst = pick(random, 1, 3 * limit.rate.permits);
    return limit;
  });
}

/// acquire runs what RedisBackend::decide picks (a lean script for a single limit);
/// acquire_by_decide always runs the general decide script.
/// renew and confirm act on the owner lease of a reservation granted earlier (confirm also
/// says where it stands).
enum class Kind { acquire, acquire_by_decide, peek, reserve, cancel, renew, confirm, adjust };

/// A confirm's answer: whether the lease was held, where the reservation stands, its slot, and
/// the cancellations that counts.
std::string confirm_text(bool lease_held, const StandingOutcome& where) {
  return "confirm: held " + std::to_string(lease_held) + ", standing " +
         std::to_string(static_cast<int>(where.standing)) + " at " + std::to_string(where.slot.us) +
         "+" + std::to_string(where.slot.frac) + " counting " + std::to_string(where.cancels);
}

/// One operation of a round.
struct Step {
  Kind kind;
  int key;
  std::int64_t now;
  std::int64_t permits;
  std::int64_t max_wait_us = 0;  ///< reserve
  std::size_t reservation = 0;   ///< cancel, renew, confirm: which one granted in an earlier round
  Adjustment adjustment = Adjustment::refund;  ///< adjust: refund, give_back or penalize permits
  std::int64_t taken_at_us = 0;                ///< adjust, give_back: when the take was
};

/// An adjustment's answer: applied (and when), or which limit refused it.
std::string adjust_text(const AdjustOutcome& outcome) {
  return outcome.applied ? "adjust applied at " + std::to_string(outcome.now_us)
                         : "adjust refused by " + std::to_string(outcome.refused_limit);
}

/// What one operation answered: every field, as text the three ways compare.
struct Outcome {
  Outcome() = default;
  explicit Outcome(std::string text_, std::optional<Reservation> granted_ = std::nullopt)
      : text(std::move(text_)), granted(std::move(granted_)) {}
  std::string text;
  std::optional<Reservation> granted;  ///< a reservation the coalesced way was granted
  bool allowed() const { return text.find("allowed 1") != std::string::npos; }
  bool denied() const { return text.find("allowed 0") != std::string::npos; }
};

using test::describe;

std::string describe(const LimitOutcome& bound, bool allowed, std::int64_t now,
                     std::size_t binding) {
  Decision d;
  d.allowed = allowed;
  d.limit = bound.limit;
  d.remaining = bound.remaining;
  d.retry_after = std::chrono::microseconds(bound.retry_after_us);
  d.reset_after = std::chrono::microseconds(bound.reset_after_us);
  d.server_time_us = now;
  d.binding = binding;
  return describe(d);
}

std::string describe_reservation(bool allowed, std::int64_t remaining, std::int64_t retry,
                                 std::int64_t reset, std::int64_t wait, FracTime slot,
                                 const ReservationBook& book, std::int64_t lease) {
  std::ostringstream out;
  out << "reserve {allowed " << allowed << ", remaining " << remaining << ", retry " << retry
      << ", reset " << reset << ", wait " << wait << ", slot " << slot.us << "+" << slot.frac
      << ", book " << book.version << "/" << book.cancels << "/" << book.epoch << ", lease "
      << lease << "}";
  return out.str();
}

std::string stale(std::int64_t version) {
  return "stale " + std::to_string(version);
}

/// The reservations granted so far (by the coalesced way), which later rounds cancel.
struct Granted {
  Reservation reservation;
  int key;
  std::int64_t permits;
};

CancelTicket ticket_of(const Granted& granted) {
  return CancelTicket{.slot = granted.reservation.slot,
                      .den = granted.reservation.den,
                      .d = granted.reservation.d,
                      .version = granted.reservation.book.version,
                      .epoch = granted.reservation.book.epoch,
                      .cancels_before = granted.reservation.book.cancels};
}

/// One sequence: a policy, its keys under two prefixes, and the model's state of each key.
class Sequence {
 public:
  Sequence(std::shared_ptr<const CompiledPolicy> policy, std::string name, std::int64_t lease_us)
      : policy_(std::move(policy)),
        name_(std::move(name)),
        lease_us_(lease_us),
        states_(keys_per_case),
        held_(keys_per_case) {
    for (auto& states : states_)
      states.resize(policy_->specs().size());
  }
  const CompiledPolicy& policy() const { return *policy_; }
  /// From the next round on, every operation runs under `policy` (a change of the limiter's
  /// policy: the stored state carries over as its epoch says).
  void change_policy(std::shared_ptr<const CompiledPolicy> policy) { policy_ = std::move(policy); }
  bool reservable() const {
    return policy_->limits().size() == 1 && can_reserve(policy_->limits().front().limit.algorithm);
  }
  /// The key base of `key` under way `way` ("a" coalesced, "b" one by one).
  std::string key_base(const std::string& way, int key) const {
    return "{" + name_ + "-" + way + "-" + std::to_string(key) + "}";
  }
  std::vector<Granted>& granted() { return granted_; }

  /// Runs `operation` through `backend` on the keys of `way`.
  Task<Outcome> run(RedisBackend& backend, const std::string& way, const Step& operation) {
    const DecideRequest request(policy_, KeyBase(key_base(way, operation.key)),
                                operation.kind == Kind::peek ? Operation::peek : Operation::acquire,
                                operation.permits, operation.now);
    try {
      switch (operation.kind) {
        case Kind::acquire:
          co_return Outcome{describe(co_await backend.decide(request))};
        case Kind::acquire_by_decide:
        case Kind::peek:
          co_return Outcome{describe(co_await backend.decide_with_general_script(request))};
        case Kind::reserve: {
          const Reservation r = co_await backend.reserve(request, operation.max_wait_us);
          co_return Outcome{
              describe_reservation(r.decision.allowed, r.decision.remaining,
                                   r.decision.retry_after.count(), r.decision.reset_after.count(),
                                   r.wait_us, r.slot, r.book, r.lease_expiry_us),
              r.decision.allowed ? std::optional<Reservation>(r) : std::nullopt};
        }
        case Kind::cancel: {
          const Granted& target = granted_[operation.reservation];
          const DecideRequest cancel(policy_, KeyBase(key_base(way, target.key)),
                                     Operation::acquire, target.permits, operation.now);
          const ReservationReply reply = co_await backend.run_reservation(
              ReservationOperation::cancel, cancel, ticket_of(target));
          co_return Outcome{"cancel " + std::to_string(static_cast<int>(reply.verdict))};
        }
        case Kind::renew:
        case Kind::confirm: {
          const Granted& target = granted_[operation.reservation];
          const DecideRequest lease(policy_, KeyBase(key_base(way, target.key)), Operation::acquire,
                                    1, operation.now);
          const ReservationReply reply = co_await backend.run_reservation(
              operation.kind == Kind::renew ? ReservationOperation::renew
                                            : ReservationOperation::confirm,
              lease, ticket_of(target));
          if (operation.kind == Kind::renew)
            co_return Outcome{"renew " + std::to_string(reply.lease_expiry_us)};
          co_return Outcome{confirm_text(reply.lease_held, reply.where)};
        }
        case Kind::adjust:
          co_return Outcome{adjust_text(co_await backend.adjust(
              request, operation.adjustment, operation.permits, operation.taken_at_us))};
      }
    } catch (const StalePolicy& refused) {
      co_return Outcome{stale(refused.stored_version())};
    }
    co_return Outcome{"unknown operation"};
  }

  /// What the model answers to `operation`, applied to its state.
  Outcome model(const Step& operation) {
    auto& states = states_[operation.key];
    auto& held = held_[operation.key];
    const auto change = policy_->change();
    const auto reclaim = [&] {
      reclaim_expired(policy_->specs().front(), states[0], held, operation.now, change);
    };
    switch (operation.kind) {
      case Kind::acquire:
      case Kind::acquire_by_decide:
      case Kind::peek: {
        const PolicyOutcome model =
            decide_policy(policy_->specs(), states, operation.now, operation.permits,
                          operation.kind == Kind::peek ? Mode::peek : Mode::acquire, change);
        if (model.stale_version != 0) return Outcome{stale(model.stale_version)};
        return Outcome{
            describe(model.binding_outcome(), model.allowed, model.now_us, model.binding)};
      }
      case Kind::reserve: {
        reclaim();
        const LimitSpec& spec = policy_->specs().front();
        const ReserveOutcome model = reserve(spec, states[0], operation.now, operation.permits,
                                             operation.max_wait_us, change);
        if (model.decision.stale_version != 0) return Outcome{stale(model.decision.stale_version)};
        const std::int64_t expiry =
            register_lease(held, spec, model, operation.now, operation.permits, lease_us_);
        return Outcome{describe_reservation(
            model.decision.allowed, model.decision.remaining, model.decision.retry_after_us,
            model.decision.reset_after_us, model.wait_us, model.slot, model.book, expiry)};
      }
      case Kind::cancel: {
        const Granted& target = granted_[operation.reservation];
        auto& target_states = states_[target.key];
        auto& target_held = held_[target.key];
        reclaim_expired(policy_->specs().front(), target_states[0], target_held, operation.now,
                        change);
        const CancelTicket ticket = ticket_of(target);
        const CancelOutcome model =
            cancel_reservation(policy_->specs().front(), target_states[0], operation.now,
                               target.permits, ticket, change);
        if (model.stale_version != 0) return Outcome{stale(model.stale_version)};
        target_held.erase(ticket.version);  // the cancel ends its lease
        return Outcome{"cancel " + std::to_string(static_cast<int>(model.verdict))};
      }
      case Kind::renew: {
        const Granted& target = granted_[operation.reservation];
        reclaim_expired(policy_->specs().front(), states_[target.key][0], held_[target.key],
                        operation.now, change);
        return Outcome{"renew " + std::to_string(renew_lease(held_[target.key],
                                                             target.reservation.book.version,
                                                             operation.now, lease_us_))};
      }
      case Kind::confirm: {
        const Granted& target = granted_[operation.reservation];
        const bool held = claim_lease(held_[target.key], target.reservation.book.version);
        return Outcome{
            confirm_text(held, reservation_standing(states_[target.key][0], ticket_of(target)))};
      }
      case Kind::adjust: {
        const AdjustOutcome model =
            adjust_policy(policy_->specs(), states, operation.now, operation.adjustment,
                          operation.permits, change, operation.taken_at_us);
        if (model.stale_version != 0) return Outcome{stale(model.stale_version)};
        return Outcome{adjust_text(model)};
      }
    }
    return Outcome{"unknown operation"};
  }

 private:
  std::shared_ptr<const CompiledPolicy> policy_;
  std::string name_;
  std::int64_t lease_us_;  ///< the owner lease the backends register reservations under
  std::vector<std::vector<std::optional<LimitState>>> states_;  ///< per key, per limit
  std::vector<HeldReservations> held_;                          ///< per key
  std::vector<Granted> granted_;
};

/// A new policy of the same algorithms (sometimes the same one again: more often without a
/// store, set_policy() of the same policy with a reset), under an epoch test::random_epoch()
/// draws: a version that mostly grows but sometimes goes back (the scripts refuse it as stale on
/// keys written under a newer one; 0 never is), or version 0 throughout (mostly resets), a
/// since before or after `now`, and a carry.
std::shared_ptr<const CompiledPolicy> next_policy(std::mt19937_64& random,
                                                  const CompiledPolicy& current,
                                                  const std::vector<Algorithm>& algorithms,
                                                  std::int64_t now, test::EpochDraws& draws) {
  Policy next;
  for (const Algorithm algorithm : algorithms)
    next.limits.push_back(random_limit(random, algorithm));
  if (pick(random, 0, draws.fixed ? 1 : 4) == 0) next = current.policy();
  const std::int64_t period = current.limits().front().limit.rate.period.count();
  return CompiledPolicy::compile(next, test::random_epoch(random, now, period, draws));
}

/// A round: 1 to 40 operations on random keys of the sequence, at times that mostly move
/// forward by less than a period, sometimes stand still, and sometimes step back; one round in
/// four stands still throughout (a hot key's batch: its denials repeat).
std::vector<Step> random_round(std::mt19937_64& random, Sequence& sequence, std::int64_t& now) {
  std::int64_t capacity = INT64_MAX;
  std::int64_t period = INT64_MAX;
  for (const auto& limit : sequence.policy().limits()) {
    capacity = std::min(capacity, limit.capacity);
    period = std::min(period, limit.limit.rate.period.count());
  }
  std::vector<Step> round;
  const int size = static_cast<int>(pick(random, 1, 40));
  const bool still = pick(random, 0, 3) == 0;
  for (int i = 0; i < size; ++i) {
    switch (still ? 0 : pick(random, 0, 9)) {
      case 0:
        break;  // the same microsecond
      case 1:
        now -= pick(random, 1, period);
        break;
      case 2:
        now += pick(random, period, 2 * period);
        break;
      default:
        now += pick(random, 0, std::max<std::int64_t>(1, period / capacity));
    }
    Step operation{Kind::acquire, static_cast<int>(pick(random, 0, keys_per_case - 1)), now,
                   pick(random, 0, 3) == 0 ? pick(random, 1, capacity) : 1};
    const auto roll = pick(random, 0, 19);
    if (roll < 2) {
      operation.kind = Kind::peek;
    } else if (roll < 5) {
      operation.kind = Kind::acquire_by_decide;
    } else if (sequence.reservable() && roll < 10) {
      operation.kind = Kind::reserve;
      operation.max_wait_us = pick(random, 0, 3) == 0 ? 0 : pick(random, 1, 4 * period);
    } else if (sequence.reservable() && roll < 15 && !sequence.granted().empty()) {
      operation.kind = roll < 13 ? Kind::cancel : roll < 14 ? Kind::renew : Kind::confirm;
      // Why mostly the latest: an owner renews or confirms a reservation it still holds.
      const auto granted = static_cast<std::int64_t>(sequence.granted().size());
      operation.reservation = static_cast<std::size_t>(
          pick(random, 0, 1) == 0
              ? pick(random, 0, granted - 1)
              : pick(random, std::max<std::int64_t>(0, granted - 3), granted - 1));
    } else if (roll >= 17) {
      static constexpr Adjustment adjustments[] = {Adjustment::refund, Adjustment::give_back,
                                                   Adjustment::penalize};
      operation.kind = Kind::adjust;
      operation.adjustment = adjustments[pick(random, 0, 2)];
      operation.taken_at_us = now - pick(random, 0, period);
    }
    round.push_back(operation);
  }
  return round;
}

/// What `key` holds, as text, whatever its type: a string's value, a sorted set's members and
/// scores, a hash's fields and values (sorted); "(none)" when it does not exist.
Task<std::string> stored(Client& client, const std::string& key) {
  const std::string type = (co_await client.command("TYPE", key)).as_string();
  if (type == "none") co_return std::string("(none)");
  if (type == "string") co_return (co_await client.command("GET", key)).as_string();
  std::vector<std::string> words;
  // Why two statements: with a co_await in each branch of one `?:` this test hung (g++ 12).
  Reply reply;
  if (type == "zset") {
    reply = co_await client.command("ZRANGE", key, "0", "-1", "WITHSCORES");
  } else {
    reply = co_await client.command("HGETALL", key);
  }
  for (std::size_t i = 0; i + 1 < reply.as_array().size(); i += 2) {
    words.push_back(reply.as_array()[i].as_string() + "=" + reply.as_array()[i + 1].as_string());
  }
  if (type == "hash") std::sort(words.begin(), words.end());
  std::string out = type + ":";
  for (const std::string& word : words)
    out += " " + word;
  co_return out;
}

struct Tally {
  int operations = 0;
  int mismatches = 0;
  int allowed = 0;
  int denied = 0;
  int batched_rounds = 0;
  int reserved = 0;     ///< reservations granted
  int cancelled = 0;    ///< cancels answered (any verdict)
  int renewed = 0;      ///< owner leases renewed while still held
  int registered = 0;   ///< reservations registered under an owner lease
  int claimed = 0;      ///< owner leases a confirm found still held (and ended)
  int lease_calls = 0;  ///< renew and confirm calls, whether the lease was still held or not
  int stale = 0;        ///< refused as stale (a newer policy version stored)
  int adjusted = 0;     ///< refunds, give-backs and penalties applied
  int policies = 0;     ///< policy changes
  long long coalesced_evalshas = 0;  ///< script calls Redis counted for the coalesced way
};

class BatchDifferential
    : public test::LoopTest,
      public ::testing::WithParamInterface<std::pair<const char*, std::vector<Algorithm>>> {
 protected:
  Task<void> run_case(std::uint64_t seed, Tally* tally);
  Client& coalescing() { return *coalescing_; }

  test::RedisServer server_;
  std::optional<Client> coalescing_;
  std::optional<Client> one_by_one_;
};

void report(Tally* tally, const std::vector<Step>& round, std::size_t index,
            const std::string& what) {
  if (++tally->mismatches > 5) return;
  std::ostringstream out;
  for (std::size_t i = 0; i <= index; ++i) {
    out << "  op " << i << ": kind " << static_cast<int>(round[i].kind) << " key " << round[i].key
        << " now " << round[i].now << " permits " << round[i].permits << " max_wait "
        << round[i].max_wait_us << " reservation " << round[i].reservation << "\n";
  }
  ADD_FAILURE() << "disagreement at operation " << index << " of a round\n" << out.str() << what;
}

Task<void> BatchDifferential::run_case(std::uint64_t seed, Tally* tally) {
  std::mt19937_64 random(seed);
  for (int s = 0; s < 4; ++s) {
    const std::int64_t lease_us = s % 2 == 0 ? short_lease_us : long_lease_us;
    RedisBackend coalesced(coalescing_->dispatcher(), std::chrono::microseconds(lease_us));
    RedisBackend alone(one_by_one_->dispatcher(), std::chrono::microseconds(lease_us));
    Policy policy;
    // Why the first sequence starts with long periods under the short lease: its reservations
    // then wait longer than their lease, so every draw registers some (the tally checks it).
    for (const Algorithm algorithm : GetParam().second)
      policy.limits.push_back(random_limit(random, algorithm, s == 0));
    Sequence sequence(CompiledPolicy::compile(policy), "seq" + std::to_string(s), lease_us);
    std::int64_t now = 1'795'000'000'000'000 + pick(random, 0, 100'000'000'000);
    test::EpochDraws draws = test::random_draws(random);
    for (int r = 0; r < rounds_per_case / 4; ++r) {
      if (r > 0 && pick(random, 0, 3) == 0) {
        ++tally->policies;
        sequence.change_policy(
            next_policy(random, sequence.policy(), GetParam().second, now, draws));
      }
      const std::vector<Step> round = random_round(random, sequence, now);
      std::vector<Outcome> batched(round.size());
      const long long script_calls_before = server_.script_calls();
      {
        TaskGroup group;
        for (std::size_t i = 0; i < round.size(); ++i) {
          group.add([](Sequence& sequence, RedisBackend& backend, const Step& operation,
                       Outcome& out) -> Task<void> {
            out = co_await sequence.run(backend, "a", operation);
          }(sequence, coalesced, round[i], batched[i]));
        }
        co_await group.join();
      }
      const long long script_calls = server_.script_calls() - script_calls_before;
      tally->coalesced_evalshas += script_calls;
      if (script_calls < static_cast<long long>(round.size())) ++tally->batched_rounds;
      for (std::size_t i = 0; i < round.size(); ++i) {
        const Outcome one = co_await sequence.run(alone, "b", round[i]);
        const Outcome model = sequence.model(round[i]);
        ++tally->operations;
        tally->allowed += model.allowed() ? 1 : 0;
        tally->denied += model.denied() ? 1 : 0;
        tally->reserved += round[i].kind == Kind::reserve && model.allowed() ? 1 : 0;
        tally->cancelled += model.text.starts_with("cancel") ? 1 : 0;
        tally->renewed += model.text.starts_with("renew") && model.text != "renew 0" ? 1 : 0;
        tally->claimed += model.text.starts_with("confirm: held 1") ? 1 : 0;
        tally->lease_calls +=
            round[i].kind == Kind::renew || round[i].kind == Kind::confirm ? 1 : 0;
        tally->registered += model.allowed() && model.text.starts_with("reserve") &&
                                     !model.text.ends_with("lease 0}")
                                 ? 1
                                 : 0;
        tally->stale += model.text.starts_with("stale") ? 1 : 0;
        tally->adjusted += model.text.starts_with("adjust applied") ? 1 : 0;
        if (batched[i].text != one.text || one.text != model.text) {
          report(tally, round, i,
                 "  coalesced  " + batched[i].text + "\n  one by one " + one.text +
                     "\n  model      " + model.text);
        }
      }
      // The reservations this round granted, for later rounds to cancel.
      for (std::size_t i = 0; i < round.size(); ++i) {
        if (batched[i].granted)
          sequence.granted().push_back({*batched[i].granted, round[i].key, round[i].permits});
      }
      for (int key = 0; key < keys_per_case; ++key) {
        std::vector<std::string> suffixes;
        for (const auto& limit : sequence.policy().limits())
          suffixes.push_back(limit.key_suffix);
        if (sequence.reservable()) {
          // The reservation key's cancel log and owner leases (lua/reservations/).
          for (const char* const extra : {":cancels", ":leases", ":held"})
            suffixes.push_back(suffixes.front() + extra);
        }
        for (const std::string& suffix : suffixes) {
          const std::string a = co_await stored(*coalescing_, sequence.key_base("a", key) + suffix);
          const std::string b = co_await stored(*one_by_one_, sequence.key_base("b", key) + suffix);
          if (a != b) {
            report(tally, round, round.size() - 1,
                   "  stored value of key " + std::to_string(key) + suffix + ": coalesced " + a +
                       ", one by one " + b);
          }
          // The scripts derive TTLs from the injected times: the two ways' differ only by the
          // wall time between their writes.
          const std::int64_t ttl_a =
              (co_await coalescing_->command("PTTL", sequence.key_base("a", key) + suffix))
                  .as_integer();
          const std::int64_t ttl_b =
              (co_await one_by_one_->command("PTTL", sequence.key_base("b", key) + suffix))
                  .as_integer();
          if ((ttl_a < 0 || ttl_b < 0) ? ttl_a != ttl_b : std::abs(ttl_a - ttl_b) > 5'000) {
            report(tally, round, round.size() - 1,
                   "  TTL of key " + std::to_string(key) + suffix + ": coalesced " +
                       std::to_string(ttl_a) + " ms, one by one " + std::to_string(ttl_b) + " ms");
          }
        }
      }
    }
  }
}

TEST_P(BatchDifferential, CoalescedOneByOneAndModelDecideIdentically) {
  const char* const fixed = std::getenv("REDLIMIT_SEED");
  const std::uint64_t seed =
      fixed != nullptr ? std::stoull(fixed)
                       : static_cast<std::uint64_t>(std::random_device{}()) % 1'000'000 + 1;
  std::printf("[ %-22s ] seed %llu\n", GetParam().first, static_cast<unsigned long long>(seed));
  ClientOptions options;
  options.url = server_.url();
  options.command_timeout = 10s;
  options.reservation_lease = 0ms;  // the backends are given their own leases
  options.max_batch = 64;
  coalescing_.emplace(loop(), options);
  options.max_batch = 1;
  one_by_one_.emplace(loop(), options);
  Tally tally;
  run(loop(), run_case(seed, &tally));
  run(loop(), coalescing_->close());
  run(loop(), one_by_one_->close());
  EXPECT_EQ(tally.mismatches, 0) << "seed " << seed;
  EXPECT_TRUE(server_.keys_without_ttl().empty()) << "a key without TTL was left";
  EXPECT_GE(tally.operations, 100);
  EXPECT_GT(tally.allowed, 0);
  EXPECT_GT(tally.denied, 0) << "rounds must also reach denials";
  // Why: without batches the comparison would prove nothing.
  EXPECT_LT(tally.coalesced_evalshas, tally.operations) << "the coalesced way sent no batch";
  EXPECT_GT(tally.batched_rounds, 0);
  EXPECT_GT(tally.adjusted, 0) << "rounds must also refund, give back and penalize";
  const auto& algorithms = GetParam().second;
  if (algorithms.size() == 1 && can_reserve(algorithms.front())) {
    EXPECT_GT(tally.reserved, 0);
    EXPECT_GT(tally.cancelled, 0);
    EXPECT_GT(tally.registered, 0) << "reservations must also wait longer than their lease";
    EXPECT_GT(tally.lease_calls, 0) << "renewals and claims must run";
  }
  std::printf(
      "[ %-22s ] %d operations, %d allowed, %d denied, %lld EVALSHAs coalesced, %d rounds "
      "batched, %d reserved, %d registered, %d cancels, %d lease calls (%d renewed, %d claimed), "
      "%d adjustments applied, %d policy changes, %d stale, seed %llu\n",
      GetParam().first, tally.operations, tally.allowed, tally.denied, tally.coalesced_evalshas,
      tally.batched_rounds, tally.reserved, tally.registered, tally.cancelled, tally.lease_calls,
      tally.renewed, tally.claimed, tally.adjusted, tally.policies, tally.stale,
      static_cast<unsigned long long>(seed));
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, BatchDifferential,
    ::testing::Values(
        std::pair<const char*, std::vector<Algorithm>>{"gcra", {Algorithm::gcra}},
        std::pair<const char*, std::vector<Algorithm>>{"token_bucket", {Algorithm::token_bucket}},
        std::pair<const char*, std::vector<Algorithm>>{"leaky_bucket", {Algorithm::leaky_bucket}},
        std::pair<const char*, std::vector<Algorithm>>{"fixed_window", {Algorithm::fixed_window}},
        std::pair<const char*, std::vector<Algorithm>>{"sliding_window_log",
                                                       {Algorithm::sliding_window_log}},
        std::pair<const char*, std::vector<Algorithm>>{"sliding_window_counter",
                                                       {Algorithm::sliding_window_counter}},
        std::pair<const char*, std::vector<Algorithm>>{
            "multi_limit",
            {Algorithm::gcra, Algorithm::fixed_window, Algorithm::sliding_window_counter}},
        std::pair<const char*, std::vector<Algorithm>>{
            "multi_limit_buckets",
            {Algorithm::token_bucket, Algorithm::leaky_bucket, Algorithm::sliding_window_log}}),
    [](const auto& info) { return std::string(info.param.first); });

}  // namespace
}  // namespace redlimit::detail
