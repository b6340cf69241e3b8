#pragma once

#include <chrono>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "limiter/backend.hpp"
#include "limiter/batching_executor.hpp"
#include "lua_scripts.hpp"
#include "redis/command_dispatcher.hpp"

namespace redlimit::detail {

/// Runs a policy with one EVALSHA of the embedded `decide` script, or of a lean script such as
/// `decide_gcra` for the try_acquire of a single limit (lean_decide_script).
class RedisBackend final : public Backend {
 public:
  /// Registers reservations under ClientOptions::reservation_lease, or under `lease` (the
  /// differential test's 1 ms leases, shorter than any ClientOptions accepts, so that owners
  /// lapse at random).
  explicit RedisBackend(CommandDispatcher& client,
                        std::optional<std::chrono::microseconds> lease = std::nullopt)
      : client_(client), calls_(script_executor_of(client)), lease_(lease) {}
  Task<void> run(std::span<BackendOp> ops) override;
  /// What a decision runs for peeks and policies of several limits, for any request: the
  /// differential test mixes it with the lean scripts on one key.
  Task<Decision> decide_with_general_script(const DecideRequest& request);
  std::uint64_t watch(const DecideRequest& request, NoticeHandler handler,
                      std::function<void()> on_confirmed) override;
  /// Semaphores: lua/semaphore.lua (redis_backend_leases.cpp).
  std::uint64_t watch_releases(std::string key, std::function<void()> handler) override;
  void unwatch(std::uint64_t id) override;
  /// The lease given at construction, else ClientOptions::reservation_lease.
  std::int64_t lease_us() const noexcept override;
  BackgroundTasks* background() noexcept override { return &client_.background(); }
  /// The client it sends through.
  CommandDispatcher& dispatcher() noexcept { return client_; }

 private:
  // ---- each operation (Backend::run()). Several claims (redis_claims.cpp,
  // redis_claims_reserving.cpp): one script call per hash slot, the protocols across a
  // cluster's slots. Semaphores: redis_backend_leases.cpp.
  /// Why not a coroutine: it only picks the script, and a layer more would cost a frame per
  /// decision.
  Task<void> perform(DecideOp& op);
  Task<void> perform(AdjustOp& op);
  Task<void> perform(ResetOp& op);
  Task<void> perform(TtlOp& op);
  Task<void> perform(ReserveOp& op);
  Task<void> perform(ReservationOp& op);
  Task<void> perform(LeaseOp& op);
  Task<void> perform(DecideClaimsOp& op);
  Task<void> perform(ReserveClaimsOp& op);
  Task<void> perform(ReserveGroupOp& op);
  /// The reserve script's answer to `operation` on the request's key, `numbers` following its
  /// limit's fields: "reserve" (the longest wait, us), "renew" (the reservation's version) or
  /// "reclaim" (0), then lease_us(); "cancel", "confirm" or "locate": a reservation's
  /// ticket_numbers().
  Task<Reply> run_reserve_script(std::string operation, const DecideRequest& request,
                                 std::span<const std::int64_t> numbers);
  /// A decision of a single limit by its lean script. `reclaiming` (a try_acquire of a single
  /// bucket limit): a denial longer than an owner lease goes on to reclaim_and_decide().
  Task<void> decide_with_lean_script(const scripts::ScriptSource& script, DecideOp& op,
                                     bool reclaiming);
  /// decide_with_general_script() of `op`.
  Task<void> decide_generally(DecideOp& op);
  /// After the denial in `op.result`: gives back the key's lapsed reservations (at most once per
  /// third of a lease per key) and, if that returned any, asks again.
  Task<void> reclaim_and_decide(const scripts::ScriptSource& script, DecideOp& op);

  CommandDispatcher& client_;
  ScriptExecutor& calls_;  ///< what its script calls go through (batching, unless turned off)
  std::optional<std::chrono::microseconds> lease_;
  /// Per reservation key: no reclaim for a denied try_acquire before this time.
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> next_reclaim_;
};

/// The lean script `request` runs rather than `decide` (acquire on a policy of one limit:
/// `decide_<algorithm>`), or nullptr. The same decision and stored state, at 0.4-0.9 x the
/// server time (docs/performance.md).
const scripts::ScriptSource* lean_decide_script(const DecideRequest& request);

/// `index`, a field of a script's reply, as one of `count` limits of a policy (`what`: or
/// claims of a call); ProtocolError, naming `script`, if it is not one.
std::size_t reply_index(std::int64_t index, std::size_t count, std::string_view script,
                        std::string_view what = "limit");

/// The KEYS and ARGV of one script call: views into strings it keeps, or that outlive it.
/// Neither copied nor moved.
class ScriptCall {
 public:
  ScriptCall() = default;
  ScriptCall(const ScriptCall&) = delete;
  ScriptCall& operator=(const ScriptCall&) = delete;

  /// Appends a key, or an argument: kept here (add_owned(), add_number()), or one that outlives
  /// this object (add_argument()).
  void add_key(std::string key) { keys_.push_back(kept_.emplace_back(std::move(key))); }
  void add_argument(std::string_view argument) { args_.push_back(argument); }
  void add_owned(std::string argument) { args_.push_back(kept_.emplace_back(std::move(argument))); }
  void add_number(std::int64_t number) { add_owned(std::to_string(number)); }
  std::span<const std::string_view> keys() const noexcept { return keys_; }
  std::span<const std::string_view> args() const noexcept { return args_; }

 private:
  std::deque<std::string> kept_;  ///< Why a deque: growing it moves none of its strings
  std::vector<std::string_view> keys_;
  std::vector<std::string_view> args_;
};

/// A call of the general scripts (lua/shapes/general.lua: decide, adjust) for `requests` (one,
/// or the claims of try_acquire_all): a key per limit of each; then the operation, `amount`,
/// the first request's injected time and policy epoch, and every limit's fields.
struct GeneralScriptCall : ScriptCall {
  GeneralScriptCall(std::span<const DecideRequest> requests, std::string_view operation,
                    std::int64_t amount);
};

/// The key holding the time of `key_base`'s latest reset (lua/reset.lua), which a give-back
/// reads (lua/shapes/adjust.lua): `<key base>:reset`, in the key's hash slot.
std::string reset_mark_key(std::string_view key_base);

/// A call of the reserve script (lua/reserve.lua) for `requests` (one, or the claims of
/// acquire_all): each one's reservation key, its cancellation log, leases and held keys; then
/// the operation, and the first request's permits, injected time, policy epoch and limit fields.
struct ReserveScriptCall : ScriptCall {
  ReserveScriptCall(std::span<const DecideRequest> requests, std::string_view operation);
};

/// The requests' indexes by hash slot (`cluster`; else one group), each slot where its first
/// request is; InvalidArgument when two requests name one Redis key.
std::vector<std::vector<std::size_t>> slot_groups(std::span<const DecideRequest> requests,
                                                  bool cluster);
/// The requests of one slot group (`group`: indexes into `requests`).
std::vector<DecideRequest> requests_of(std::span<const DecideRequest> requests,
                                       const std::vector<std::size_t>& group);

/// The Decision in `fields` of a decide or reserve script's reply, with `binding`: allowed (1),
/// the server time, then from `first` on the binding limit's capacity, remaining, retry_after
/// and reset_after (us).
Decision decision_from_fields(const std::vector<Reply>& fields, std::size_t first,
                              std::size_t binding);

/// The Decision in a reply of the decide script; ProtocolError if it has another shape.
Decision decision_from_reply(const Reply& reply, std::size_t limit_count);

/// The Decision in a reply of a lean script ("allowed now limit remaining retry_after
/// reset_after"); ProtocolError if it has another shape.
Decision decision_from_lean_reply(const Reply& reply);

}  // namespace redlimit::detail
