#pragma once

#include <uv.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "redis/held_call.hpp"
#include "redis/script_executor.hpp"
#include "redlimit/reply.hpp"
#include "redlimit/task.hpp"
#include "runtime/completion.hpp"
#include "runtime/uv_handles.hpp"

namespace redlimit::detail {

class CommandDispatcher;
class Connection;

/// What limiters' and semaphores' script calls on `client` go through: the client's
/// BatchingExecutor (made at the first call, see CommandDispatcher::decorated) unless
/// ClientOptions::max_batch is 1, else the client itself.
ScriptExecutor& script_executor_of(CommandDispatcher& client);

/// A decorator over a client's CommandDispatcher that coalesces calls of the scripts the batch
/// script holds (others go straight to the dispatcher): the calls queued for one server while
/// the loop runs go in the loop's next idle phase as one EVALSHA of the batch script
/// (lua/batch.lua), in the order queued (in a cluster, grouped by slot), at most max_batch per
/// call. In a cluster a batch holds the calls of every slot one primary serves, as the slot map
/// says (lua/batch_across_slots.lua, Redis >= 7), or of one slot: when the map does not say who
/// serves a slot yet, and once a server refused the cross-slot script (Redis < 7). A call queued
/// alone goes as it would have without a batcher, from its command's frame (HeldCall). No timer:
/// libuv runs idle handles right before the prepare phase in which the connections write
/// (redis/uv_glue.cpp), and an active idle handle keeps the poll from blocking, so coalescing
/// adds no latency. A full batch queued by the callers a batch resumes goes at once (run_batch).
/// While `max_in_flight` batches of a group are in flight, its calls that are not a full batch
/// wait for one of them to end (ClientOptions::max_batches_in_flight).
///
/// Each call keeps its own reply or error: a call whose script raised an error fails alone; a
/// batch Redis could not answer fails each of its calls with the same error. Calls Redis ran
/// none of go again, each alone, through the cluster router (which follows MOVED and ASK and
/// waits out TRYAGAIN): all the calls of a batch refused as a whole (MOVED, ASK, TRYAGAIN,
/// CROSSSLOT), and the calls of a batch across slots on keys its node would not serve alone.
/// Each call ends by its own deadline: the batch is sent with the latest of its calls', and a
/// call whose deadline passes while Redis (or the WAIT for replicas) has not answered ends then
/// with TimeoutError alone.
class BatchingExecutor final : public ExecutorDecorator, private HeldCall::Holder {
 public:
  /// Batches across the slots of one cluster node with `across_slots` (null: per slot only);
  /// at most `max_in_flight` batches of one group in flight at once (0: no limit).
  BatchingExecutor(uv_loop_t* loop, CommandDispatcher& dispatcher, std::size_t max_batch,
                   std::size_t max_in_flight, const scripts::ScriptSource* across_slots);
  BatchingExecutor(const BatchingExecutor&) = delete;
  BatchingExecutor& operator=(const BatchingExecutor&) = delete;

  Task<Reply> eval(const scripts::ScriptSource& script, std::span<const std::string_view> keys,
                   std::span<const std::string_view> args, Clock::time_point deadline) override;

  ~BatchingExecutor() override { *alive_ = false; }

  /// Sends the calls still queued alone and waits for the batches in flight; closes the
  /// handle. Calls queued afterwards are sent alone.
  Task<void> close() override;

 private:
  /// Queues `call`; false (the caller goes on to send it alone) once closed.
  bool hold(HeldCall& call) override;
  static void on_idle(void* self);
  /// Sends everything queued, as batches and calls alone, until nothing is queued.
  void flush();
  /// Where a call goes, batched with the calls of the same group: to the `server` that serves
  /// its slot (with the calls of every slot it serves: no slot), or, when null, with the calls
  /// of its `slot` alone.
  struct Group {
    const Connection* server;
    std::optional<std::uint16_t> slot;
    bool operator==(const Group&) const = default;
  };
  Group group_of(const HeldCall& call);
  /// A batch sent and not ended yet: its group, and when it ends at the latest (the latest
  /// deadline of its calls: the batch's own).
  struct InFlight {
    std::uint64_t id;
    Group group;
    Clock::time_point ends_by;
    Clock::time_point earliest;  ///< the earliest deadline of its calls
    /// Its calls (run_batch's) while Redis, or the WAIT for replicas, has not answered them;
    /// else null: those whose deadline comes before the batch's end there (expire_calls()).
    std::vector<HeldCall*>* calls = nullptr;
  };
  /// Whether calls of `group` queued before wait for a batch of it to end.
  bool behind_waiting(const Group& group) const;
  /// Whether max_in_flight_ batches of `group` are in flight, one of which ends by `deadline`.
  bool saturated(const Group& group, Clock::time_point deadline) const;
  /// Moves the calls in flushing_[from, to) (`group`; the earliest of their deadlines is
  /// `earliest`) to waiting_.
  void keep_waiting(std::size_t from, std::size_t to, const Group& group,
                    Clock::time_point earliest);
  /// Moves the waiting calls in front of the queued ones (the order they were queued in).
  void requeue_waiting();
  /// Sends the calls in flushing_[from, to) (`group`, non-null ones) as one batch.
  void start_batch(std::size_t from, std::size_t to, const Group& group);
  /// Runs the batch of `calls`, in in_flight_ under `id`.
  Task<void> run_batch(std::vector<HeldCall*> calls, std::uint64_t id);
  /// Sends the call at `place` (a batch's, which Redis did not run) alone and gives it its
  /// reply or error, unless it went meanwhile (`*place` null).
  Task<void> send_again_alone(HeldCall** place);
  /// Batches per slot from now on: a server refused the cross-slot script with `error`.
  void stop_batching_across_slots(const std::string& error);
  /// From now on each of `calls`, the batch `id`'s, ends by its own deadline; null: no longer.
  void expire_from(std::uint64_t id, std::vector<HeldCall*>* calls);
  /// Arms the expiry timer for the earliest deadline of a call of a batch in flight that is
  /// earlier than its batch's.
  void arm_expiry();
  static void on_expiry(void* self);
  /// Ends with TimeoutError every call of a batch in flight whose deadline passed; the batch
  /// goes on for the others.
  void expire_calls();
  /// Resumes `call` to be sent alone.
  void send_alone(HeldCall* call);
  /// Resumes the calls of a batch (clearing their places) whose `held` is `held_ones`: the
  /// calls answered at once, or those that waited for the replicas.
  void resume_calls(std::vector<HeldCall*>& calls, const std::vector<bool>& held, bool held_ones,
                    const std::shared_ptr<bool>& alive);

  uv_loop_t* loop_;
  CommandDispatcher& dispatcher_;
  std::size_t max_batch_;
  std::size_t max_in_flight_;  ///< batches of one group in flight at once (0: no limit)
  /// The batch script across slots; null when batches are per slot.
  const scripts::ScriptSource* across_slots_;
  std::vector<HeldCall*> queued_;    ///< in the order queued; null where a call's frame went
  std::vector<HeldCall*> flushing_;  ///< what flush() is sending
  /// Calls waiting for a batch of their group to end, in the order queued; null where a call's
  /// frame went. They go before the calls queued since, in the flush that the end starts.
  std::vector<HeldCall*> waiting_;
  /// The groups of the calls in waiting_, each with the earliest deadline of its calls there.
  struct WaitingGroup {
    Group group;
    Clock::time_point earliest;
  };
  std::vector<WaitingGroup> waiting_groups_;
  std::vector<InFlight> in_flight_;
  std::uint64_t next_batch_id_ = 0;
  std::unique_ptr<Idle> idle_;
  std::unique_ptr<Timer> expiry_;  ///< expire_calls(), made at the first batch
  Clock::time_point expiry_at_ = Clock::time_point::max();  ///< when expiry_ fires (if armed)
  bool closed_ = false;
  bool flushing_now_ = false;  ///< flush() runs (close() then waits for it to end)
  /// The group of the last call queued, and how many calls queued last in a row are of it: a
  /// full batch of them goes at once (run_batch).
  Group tail_group_{};
  std::size_t tail_run_ = 0;
  /// Why: a caller resumed here may destroy the client, and this object with it.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::unique_ptr<Completion> batches_ended_;  ///< while close() waits for batches in flight
  std::unique_ptr<Completion> flush_ended_;    ///< while close() waits for flush() to end
};

}  // namespace redlimit::detail
