#include "limiter/batching_executor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <string>
#include <string_view>

#include "limiter/batch_script.hpp"
#include "metrics/instruments.hpp"
#include "redis/command_dispatcher.hpp"
#include "redis/error_count.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/task_group.hpp"
#include "runtime/background_tasks.hpp"

namespace redlimit::detail {
namespace {

/// Whether `message`, a per-call error of a batch across slots, says its node would not serve
/// the call's keys alone (Redis and Valkey word it alike): the call ran nothing.
bool refused_in_batch(std::string_view message) {
  return message.find("Script attempted to access a non local key") != std::string_view::npos ||
         message.find("Script attempted to access keys that do not hash to the same slot") !=
             std::string_view::npos;
}

/// Whether `message`, the error of a whole batch across slots, is the server refusing the
/// script's shebang: Redis < 7 compiles it as Lua ("Error compiling script ... near '#'"),
/// a server that knows shebangs but not the flag names it.
bool refuses_shebang(std::string_view message) {
  return message.find("Error compiling script") != std::string_view::npos ||
         message.find("shebang") != std::string_view::npos;
}

/// Whether `code` refuses a whole batch that ran nothing (what CommandDispatcher::eval_batch
/// raises at once).
bool refuses_unrun(std::string_view code) {
  return code == "MOVED" || code == "ASK" || code == "TRYAGAIN" || code == "CROSSSLOT";
}

std::exception_ptr client_destroyed() {
  return std::make_exception_ptr(ConnectionError("the client was destroyed", true));
}

/// Tells every call of `calls` its place there, which it clears if its frame goes first.
void place_in(std::vector<HeldCall*>& calls) {
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (HeldCall* call = calls[i]) {
      call->list = &calls;
      call->index = i;
    }
  }
}

}  // namespace

ScriptExecutor& script_executor_of(CommandDispatcher& client) {
  if (client.options().max_batch == 1) return client;
  return client.decorated([](CommandDispatcher& dispatcher) -> std::unique_ptr<ExecutorDecorator> {
    return std::make_unique<BatchingExecutor>(
        dispatcher.loop(), dispatcher, dispatcher.options().max_batch,
        dispatcher.options().max_batches_in_flight, &scripts::batch_across_slots);
  });
}

BatchingExecutor::BatchingExecutor(uv_loop_t* loop, CommandDispatcher& dispatcher,
                                   std::size_t max_batch, std::size_t max_in_flight,
                                   const scripts::ScriptSource* across_slots)
    : loop_(loop),
      dispatcher_(dispatcher),
      max_batch_(max_batch),
      max_in_flight_(max_in_flight),
      across_slots_(dispatcher.is_cluster() ? across_slots : nullptr) {}

BatchingExecutor::Group BatchingExecutor::group_of(const HeldCall& call) {
  if (across_slots_ != nullptr && call.slot) {
    if (const Connection* server = dispatcher_.router().owner(*call.slot)) {
      return {.server = server, .slot = std::nullopt};
    }
  }
  return {.server = nullptr, .slot = call.slot};
}

bool BatchingExecutor::behind_waiting(const Group& group) const {
  return std::ranges::any_of(
      waiting_groups_, [&group](const WaitingGroup& waiting) { return waiting.group == group; });
}

bool BatchingExecutor::saturated(const Group& group, Clock::time_point deadline) const {
  if (max_in_flight_ == 0) return false;
  std::size_t count = 0;
  Clock::time_point first_end = Clock::time_point::max();
  for (const InFlight& batch : in_flight_) {
    if (batch.group != group) continue;
    ++count;
    first_end = std::min(first_end, batch.ends_by);
  }
  return count >= max_in_flight_ && deadline >= first_end;
}

void BatchingExecutor::stop_batching_across_slots(const std::string& error) {
  if (across_slots_ == nullptr) return;
  across_slots_ = nullptr;
  dispatcher_.logger()->warn(
      "redis cluster: a server refused the batch script across slots ({}); batches go per slot "
      "(Redis >= 7 runs a batch per node)",
      error);
}

// Why not a coroutine: it only picks the path, and a layer more would cost a frame per decision.
Task<Reply> BatchingExecutor::eval(const scripts::ScriptSource& script,
                                   std::span<const std::string_view> keys,
                                   std::span<const std::string_view> args,
                                   Clock::time_point deadline) {
  if (!coalesces(script)) return dispatcher_.eval(script, keys, args, deadline);
  return dispatcher_.eval_held(*this, script, keys, args, deadline);
}

bool BatchingExecutor::hold(HeldCall& call) {
  if (closed_) {
    call.alone = true;
    return false;
  }
  call.list = &queued_;
  call.index = queued_.size();
  queued_.push_back(&call);
  const Group group = group_of(call);
  if (queued_.size() == 1 || group != tail_group_) {
    tail_group_ = group;
    tail_run_ = 0;
  }
  ++tail_run_;
  if (!idle_) idle_ = std::make_unique<Idle>(loop_, &on_idle, this, nullptr);
  if (queued_.size() == 1) idle_->start();
  return true;
}

void BatchingExecutor::on_idle(void* self) {
  static_cast<BatchingExecutor*>(self)->flush();
}

void BatchingExecutor::flush() {
  const std::shared_ptr<bool> alive = alive_;
  flushing_now_ = true;
  requeue_waiting();
  // Why a loop: a call queued while this runs (by a caller resumed here) goes in this
  // iteration too; the idle handle does not run again in it.
  while (!queued_.empty()) {
    flushing_.swap(queued_);
    tail_run_ = 0;
    if (dispatcher_.is_cluster()) {
      // By server, then slot: a batch's calls of the slot of its first go first, and their
      // keys route it. Why stable: calls on one slot keep their order.
      std::stable_sort(flushing_.begin(), flushing_.end(),
                       [this](const HeldCall* a, const HeldCall* b) {
                         if (a == nullptr || b == nullptr) return a != nullptr && b == nullptr;
                         const Connection* const server_a = group_of(*a).server;
                         const Connection* const server_b = group_of(*b).server;
                         if (server_a != server_b) return std::less<>()(server_a, server_b);
                         return a->slot < b->slot;
                       });
    }
    place_in(flushing_);
    // Runs of one group, at most max_batch_ calls each. Why re-read flushing_ every time: a
    // caller resumed here may destroy the frames of calls after it (they null their place).
    std::size_t from = 0;
    while (from < flushing_.size()) {
      if (flushing_[from] == nullptr) {
        ++from;
        continue;
      }
      const Group group = group_of(*flushing_[from]);
      std::size_t to = from;
      std::size_t count = 0;
      Clock::time_point earliest = Clock::time_point::max();
      while (to < flushing_.size() && count < max_batch_ &&
             (flushing_[to] == nullptr || group == group_of(*flushing_[to]))) {
        if (flushing_[to] != nullptr) {
          ++count;
          earliest = std::min(earliest, flushing_[to]->deadline);
        }
        ++to;
      }
      // Why a full batch goes at once: it is as large as a batch gets. Why it still waits
      // behind calls of its group that wait: calls on one key apply in the order queued.
      if (behind_waiting(group) || (count < max_batch_ && saturated(group, earliest))) {
        keep_waiting(from, to, group, earliest);
      } else if (count == 1) {
        send_alone(flushing_[from]);
      } else {
        start_batch(from, to, group);
      }
      if (!*alive) return;  // a resumed caller destroyed the client
      from = to;
    }
    flushing_.clear();
  }
  flushing_now_ = false;
  // Why it may go on: a batch that ended during this flush (refused at once) lets calls that
  // wait go at the next idle phase; else only the end of a batch in flight does.
  const bool may_go = std::ranges::any_of(waiting_groups_, [this](const WaitingGroup& waiting) {
    return !saturated(waiting.group, waiting.earliest);
  });
  if (!may_go) idle_->stop();
  // Why last: what close() does once resumed may end with the client destroyed.
  if (flush_ended_) flush_ended_->set();
}

void BatchingExecutor::send_alone(HeldCall* call) {
  flushing_[call->index] = nullptr;
  call->list = nullptr;
  call->alone = true;
  call->waiter.resume();
}

void BatchingExecutor::keep_waiting(std::size_t from, std::size_t to, const Group& group,
                                    Clock::time_point earliest) {
  for (std::size_t i = from; i < to; ++i) {
    if (HeldCall* call = std::exchange(flushing_[i], nullptr)) {
      call->list = &waiting_;
      call->index = waiting_.size();
      waiting_.push_back(call);
    }
  }
  const auto known = std::ranges::find_if(
      waiting_groups_, [&group](const WaitingGroup& waiting) { return waiting.group == group; });
  if (known == waiting_groups_.end()) {
    waiting_groups_.push_back({.group = group, .earliest = earliest});
  } else {
    known->earliest = std::min(known->earliest, earliest);
  }
}

void BatchingExecutor::requeue_waiting() {
  // Why no place needs setting here: the caller places the list it sends before anything can
  // resume a caller (and so destroy a call's frame).
  queued_.insert(queued_.begin(), waiting_.begin(), waiting_.end());
  waiting_.clear();
  waiting_groups_.clear();
}

void BatchingExecutor::start_batch(std::size_t from, std::size_t to, const Group& group) {
  std::vector<HeldCall*> calls;
  calls.reserve(to - from);
  Clock::time_point ends_by = Clock::time_point::min();
  Clock::time_point earliest = Clock::time_point::max();
  for (std::size_t i = from; i < to; ++i) {
    if (HeldCall* call = std::exchange(flushing_[i], nullptr)) {
      call->list = nullptr;
      calls.push_back(call);
      ends_by = std::max(ends_by, call->deadline);
      earliest = std::min(earliest, call->deadline);
    }
  }
  // Why its calls' latest deadline: each of them is answered by its own deadline (the earlier
  // ones end alone, expire_calls()), also when the batch splits and they go again alone.
  const std::uint64_t id = next_batch_id_++;
  in_flight_.push_back({.id = id, .group = group, .ends_by = ends_by, .earliest = earliest});
  dispatcher_.background().start_upkeep_now(run_batch(std::move(calls), id));
}

Task<void> BatchingExecutor::send_again_alone(HeldCall** place) {
  // Why copied: the call goes if its caller's frame does, and its words with it, while this
  // command may still be sent again (a redirect, NOSCRIPT).
  const HeldCall& call = **place;
  const scripts::ScriptSource& script = *call.script;
  const Clock::time_point deadline = call.deadline;
  const std::vector<std::string> keys(call.keys.begin(), call.keys.end());
  const std::vector<std::string> args(call.args.begin(), call.args.end());
  const std::vector<std::string_view> key_views(keys.begin(), keys.end());
  const std::vector<std::string_view> arg_views(args.begin(), args.end());
  try {
    Reply reply = co_await dispatcher_.eval(script, key_views, arg_views, deadline);
    if (*place != nullptr) (*place)->reply = std::move(reply);
  } catch (...) {
    if (*place != nullptr) (*place)->error = std::current_exception();
  }
}

Task<void> BatchingExecutor::run_batch(std::vector<HeldCall*> calls, std::uint64_t id) {
  // Why first, before any suspension: from here a call whose frame goes clears its place.
  for (HeldCall*& call : calls)
    call->in_batch = &call;
  const std::shared_ptr<bool> alive = alive_;
  // Why the keys of the first slot's calls declared, the others' sent as arguments: a cluster
  // refuses declared keys of several slots (CROSSSLOT), and routes the batch by the first key.
  std::size_t declared = 1;
  while (declared < calls.size() && calls[declared]->slot == calls.front()->slot)
    ++declared;
  const scripts::ScriptSource* const script =
      declared == calls.size() ? &scripts::batch : across_slots_;
  std::exception_ptr failure;
  bool split = false;  // every call goes alone
  Reply reply;
  std::optional<ReplicaAck> replicas;  // the WAIT after the batch (ClientOptions::replicas)
  try {
    Clock::time_point deadline = Clock::time_point::min();
    for (const HeldCall* call : calls)
      deadline = std::max(deadline, call->deadline);
    const BatchWords words = batch_words(calls, declared);
    expire_from(id, &calls);
    reply = co_await dispatcher_.eval_batch(*script, words.keys, words.args, deadline, calls.size(),
                                            script != &scripts::batch, replicas);
    if (reply.type != Reply::Type::array || reply.elements.size() != calls.size()) {
      throw ProtocolError(
          "the batch script of " + std::to_string(calls.size()) + " calls returned " +
          (reply.type == Reply::Type::array ? std::to_string(reply.elements.size()) + " replies"
                                            : std::string("no array")));
    }
  } catch (const ReplyError& error) {
    // Why the refusals answered: the batch's slots are not served together now (migrating:
    // Redis answers TRYAGAIN while a slot's keys are split between two nodes; across slots, a
    // slot moved or migrating), where each call alone follows MOVED and ASK, or waits the
    // migration out.
    split = refuses_unrun(error.code());
    if (script != &scripts::batch && refuses_shebang(error.what())) {
      stop_batching_across_slots(error.what());
      split = true;
    }
    if (!split) failure = std::current_exception();
  } catch (...) {
    failure = std::current_exception();
  }
  // Why not while calls go again alone: each of those ends by its own deadline, and the others
  // hold their answers.
  if (*alive) expire_from(id, nullptr);
  if (!*alive && !failure) {
    split = false;
    failure = client_destroyed();
  }
  // The calls that go again, alone: every one after a split; else those whose keys the node
  // would not serve in a batch across slots (it ran nothing of them).
  std::vector<bool> again(calls.size(), split);
  if (!failure && !split) {
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const Reply& element = reply.elements[i];
      again[i] = element.type == Reply::Type::error && refused_in_batch(element.str);
    }
  }
  if (std::ranges::find(again, true) != again.end()) {
    // Why from here, before any caller resumes: close() waits for this batch until every call
    // is answered, and a resumed caller may destroy the client while others are still to go.
    // Started in the order queued, they are written in that order.
    TaskGroup group;
    for (std::size_t i = 0; i < calls.size(); ++i) {
      if (again[i] && calls[i] != nullptr) group.add(send_again_alone(&calls[i]));
    }
    co_await group.join();
    if (!*alive && !failure) failure = client_destroyed();
  }
  // Every answer first, before any caller resumes (answer() needs the dispatcher). Each call
  // that fails counts once among the errors (a call sent again alone counted itself).
  std::uint64_t failed = 0;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    HeldCall* call = calls[i];
    if (call == nullptr || again[i]) continue;
    if (failure) {
      call->error = failure;
      ++failed;
      continue;
    }
    try {
      call->reply = dispatcher_.answer(std::move(reply.elements[i]), call->script);
    } catch (...) {
      call->error = std::current_exception();
      count_redis_error(dispatcher_.redis_metrics(), call->error);
    }
  }
  // Why once for all: classifying an error rethrows it, and a batch may hold a thousand calls.
  if (*alive && failed > 0) {
    if (const std::optional<RedisError> kind = redis_error_of(failure)) {
      dispatcher_.redis_metrics().errors[static_cast<std::size_t>(*kind)].add(failed);
    }
  }
  // With replicas, the calls that wrote wait for the WAIT that covers the batch; the others
  // are answered first, at once.
  std::vector<bool> held(calls.size(), false);
  bool any_held = false;
  if (replicas) {
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const HeldCall* call = calls[i];
      held[i] = call != nullptr && !again[i] && !call->error &&
                dispatcher_.wrote(*call->script, call->args, call->reply);
      any_held = any_held || held[i];
    }
    if (!any_held) replicas->skip();
  }
  if (any_held) {
    resume_calls(calls, held, false, alive);
    // Why the batch still counts as in flight: close() waits for the answers to its writes.
    std::exception_ptr shortfall;
    if (*alive) {
      // Why: the calls that wrote wait for their replicas, but not past their own deadlines.
      expire_from(id, &calls);
      shortfall = co_await replicas->confirm();
    } else {
      shortfall = client_destroyed();
    }
    for (std::size_t i = 0; i < calls.size(); ++i) {
      if (!held[i] || calls[i] == nullptr || !shortfall) continue;
      calls[i]->error = shortfall;
      if (*alive) count_redis_error(dispatcher_.redis_metrics(), shortfall);
    }
  }
  // Why before the callers resume: a resumed caller may destroy the client, and this object
  // with it; from here on only the calls, which clear their place when destroyed, are touched.
  if (*alive) {
    std::erase_if(in_flight_, [id](const InFlight& batch) { return batch.id == id; });
    // Why: the calls that waited for a batch of their group to end go at the next idle phase.
    if (!waiting_.empty()) idle_->start();
    if (in_flight_.empty() && batches_ended_) batches_ended_->set();
  }
  // Every call still to answer: the held ones, or all when none was held.
  resume_calls(calls, held, any_held, alive);
}

void BatchingExecutor::expire_from(std::uint64_t id, std::vector<HeldCall*>* calls) {
  const auto batch = std::ranges::find(in_flight_, id, &InFlight::id);
  if (batch == in_flight_.end()) return;
  batch->calls = calls;
  if (calls != nullptr && batch->earliest < batch->ends_by && batch->earliest < expiry_at_) {
    arm_expiry();
  }
}

void BatchingExecutor::arm_expiry() {
  expiry_at_ = Clock::time_point::max();
  for (const InFlight& batch : in_flight_) {
    if (batch.calls == nullptr) continue;
    for (const HeldCall* call : *batch.calls) {
      if (call != nullptr && call->deadline < batch.ends_by) {
        expiry_at_ = std::min(expiry_at_, call->deadline);
      }
    }
  }
  if (expiry_at_ == Clock::time_point::max()) {
    if (expiry_) expiry_->stop();
    return;
  }
  if (!expiry_) {
    expiry_ = std::make_unique<Timer>(loop_, &on_expiry, this, nullptr);
    // Why unref: the connections keep the loop running while a batch is in flight.
    expiry_->unref();
  }
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(expiry_at_ - Clock::now());
  expiry_->start(static_cast<std::uint64_t>(std::max<std::int64_t>(wait.count(), 0)));
}

void BatchingExecutor::on_expiry(void* self) {
  static_cast<BatchingExecutor*>(self)->expire_calls();
}

void BatchingExecutor::expire_calls() {
  const auto now = Clock::now();
  std::size_t count = 0;
  for (const InFlight& batch : in_flight_) {
    if (batch.calls == nullptr) continue;
    count +=
        static_cast<std::size_t>(std::ranges::count_if(*batch.calls, [now](const HeldCall* call) {
          return call != nullptr && call->deadline <= now;
        }));
  }
  // Why their places move here: a caller resumed first may destroy the frame of another.
  std::vector<HeldCall*> expired;
  expired.reserve(count);
  for (const InFlight& batch : in_flight_) {
    if (batch.calls == nullptr) continue;
    for (HeldCall*& call : *batch.calls) {
      if (call == nullptr || call->deadline > now) continue;
      call->error = std::make_exception_ptr(TimeoutError(
          "redis: no answer within the call's deadline (its batch, or the WAIT for its "
          "replicas, is still in flight)",
          true));
      count_redis_error(dispatcher_.redis_metrics(), call->error);
      expired.push_back(std::exchange(call, nullptr));
      expired.back()->in_batch = &expired.back();
    }
  }
  arm_expiry();
  for (HeldCall*& place : expired) {
    if (HeldCall* call = std::exchange(place, nullptr)) {
      call->in_batch = nullptr;
      call->waiter.resume();
    }
  }
}

void BatchingExecutor::resume_calls(std::vector<HeldCall*>& calls, const std::vector<bool>& held,
                                    bool held_ones, const std::shared_ptr<bool>& alive) {
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (calls[i] == nullptr || held[i] != held_ones) continue;
    HeldCall* const resumed = std::exchange(calls[i], nullptr);
    resumed->in_batch = nullptr;
    resumed->waiter.resume();
    // Why here, not when the loop is about to poll: the callers this batch resumes queue their
    // next calls, and a full batch of them sent now keeps Redis busy while the client answers
    // the other replies it read; sent at the end of the iteration, the batches in flight all
    // come back together, and the client and Redis take turns instead. Why only a full batch of
    // one group: calls of several groups, sent now, would go as several small batches.
    if (*alive && !flushing_now_ && !closed_ && tail_run_ >= max_batch_) flush();
  }
}

Task<void> BatchingExecutor::close() {
  closed_ = true;
  // Why: close() called by a caller that flush() resumed; flush() goes on sending what is
  // queued (what this caller queued first included) once this suspends, and the client accepts
  // commands until then.
  if (flushing_now_) {
    flush_ended_ = std::make_unique<Completion>();
    co_await flush_ended_->wait();
  }
  // What is still queued, or waits, goes alone (in the order queued).
  requeue_waiting();
  flushing_.swap(queued_);
  place_in(flushing_);
  for (std::size_t i = 0; i < flushing_.size(); ++i) {
    if (HeldCall* call = flushing_[i]) send_alone(call);
  }
  flushing_.clear();
  if (!in_flight_.empty()) {
    batches_ended_ = std::make_unique<Completion>();
    co_await batches_ended_->wait();
  }
  if (idle_) idle_->close();
  if (expiry_) expiry_->close();
}

}  // namespace redlimit::detail
