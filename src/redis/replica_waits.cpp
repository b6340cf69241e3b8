#include "redis/replica_waits.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "redis/connection.hpp"
#include "redis/reply_convert.hpp"
#include "redlimit/errors.hpp"
#include "runtime/background_tasks.hpp"

namespace redlimit::detail {

WaitRound::Answered::~Answered() {
  if (waiting_) round_.waiters_[index_] = nullptr;
}

void WaitRound::Answered::await_suspend(std::coroutine_handle<> waiter) {
  waiter_ = waiter;
  waiting_ = true;
  index_ = round_.waiters_.size();
  round_.waiters_.push_back(this);
}

void WaitRound::finish(std::int64_t acknowledged, std::exception_ptr error) {
  acknowledged_ = acknowledged;
  error_ = std::move(error);
  done_ = true;
  // Why by index, re-read each time: a resumed waiter may destroy the awaiters of others.
  for (std::size_t i = 0; i < waiters_.size(); ++i) {
    Answered* const answered = std::exchange(waiters_[i], nullptr);
    if (answered != nullptr) answered->wake();
  }
  waiters_.clear();
}

ReplicaWaits::ReplicaWaits(uv_loop_t* loop, Connection& connection, BackgroundTasks& tasks,
                           int replicas, std::chrono::milliseconds replica_timeout,
                           std::chrono::milliseconds command_timeout)
    : connection_(connection),
      tasks_(tasks),
      replicas_(replicas),
      replica_timeout_(replica_timeout),
      command_timeout_(command_timeout) {
  overdue_.init(loop, uv_timer_init);
  overdue_.get()->data = this;
}

void ReplicaWaits::on_overdue(uv_timer_t* timer) {
  auto* self = static_cast<ReplicaWaits*>(timer->data);
  WaitRound* const round = self->sent_;
  if (round == nullptr || round->done()) return;
  // Why nothing after finish(): a resumed caller may close the client, and this object with it.
  round->finish(0, std::make_exception_ptr(TimeoutError(
                       "redis " + self->connection_.name() +
                           ": the WAIT for ClientOptions::replicas was not answered by the "
                           "call's deadline; the writes stay on the primary",
                       true)));
}

std::shared_ptr<WaitRound> ReplicaWaits::cover(Clock::time_point deadline) {
  if (in_flight_) {
    if (!next_) next_ = std::make_shared<WaitRound>();
    next_->cover(deadline);
    return next_;
  }
  auto round = std::make_shared<WaitRound>();
  round->cover(deadline);
  in_flight_ = true;
  // Why at once: the WAIT goes right behind the call, before anything else is sent.
  tasks_.start_upkeep_now(run(round));
  return round;
}

Task<void> ReplicaWaits::run(std::shared_ptr<WaitRound> round) {
  const std::shared_ptr<bool> alive = alive_;
  while (round) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(round->deadline() - Clock::now());
    // Why at least 1 ms: `WAIT n 0` blocks until the replicas answer, however long.
    round->send_with(std::max(std::chrono::milliseconds(1), std::min(replica_timeout_, left / 2)));
    const std::string replicas = std::to_string(replicas_);
    const std::string milliseconds = std::to_string(round->timeout().count());
    const std::array<std::string_view, 3> words = {"WAIT", replicas, milliseconds};
    // Why a deadline past the timeout: the WAIT legitimately blocks the connection that long;
    // only a reply later still means the connection is lost. Why a follow-up: it completes
    // the calls in flight when the client began to close.
    const auto deadline = Clock::now() + round->timeout() + command_timeout_;
    sent_ = round.get();
    const auto until_due = std::chrono::ceil<std::chrono::milliseconds>(
        std::max(round->deadline() - Clock::now(), Clock::duration::zero()));
    uv_timer_start(overdue_.get(), &on_overdue, static_cast<std::uint64_t>(until_due.count()), 0);
    std::int64_t acknowledged = 0;
    std::exception_ptr error;
    try {
      const CommandResult result = co_await connection_.send(words, deadline, true);
      if (result.reply.type == Reply::Type::error) {
        const std::exception_ptr refused =
            exception_from_error(result.reply.str, "WAIT (ClientOptions::replicas)");
        // Why a refusal other than a permission is unavailability: the server answers WAIT
        // with an error when it is no longer a primary (demoted between a call and its WAIT),
        // and nothing says the writes before it are held.
        try {
          std::rethrow_exception(refused);
        } catch (const ConfigError&) {
          throw;
        } catch (...) {
          throw ConnectionError("redis " + connection_.name() + ": WAIT refused (" +
                                    result.reply.str + "); the writes before it may be lost",
                                true);
        }
      }
      acknowledged = result.reply.as_integer();
    } catch (...) {
      error = std::current_exception();
    }
    if (!*alive) co_return;
    uv_timer_stop(overdue_.get());
    sent_ = nullptr;
    std::shared_ptr<WaitRound> answered = std::move(round);
    round = std::exchange(next_, nullptr);
    in_flight_ = round != nullptr;
    // Why last: a resumed caller may send calls (they join the next round) or close the client.
    // Why maybe done: its calls' deadline passed first (on_overdue).
    if (!answered->done()) answered->finish(acknowledged, std::move(error));
    if (!*alive) co_return;
  }
}

}  // namespace redlimit::detail
