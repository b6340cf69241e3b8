#include "runtime/loop_turn.hpp"

namespace redlimit::detail {

void LoopTurn::enqueue(Yield* waiter) {
  if (!idle_) {
    idle_ = std::make_unique<Idle>(loop_, &on_idle, this, nullptr);
    idle_->start();
  }
  waiter->previous_ = last_;
  waiter->next_ = nullptr;
  if (last_ != nullptr) {
    last_->next_ = waiter;
  } else {
    first_ = waiter;
  }
  last_ = waiter;
  waiter->round_ = round_;
  waiter->queued_ = true;
}

void LoopTurn::unlink(Yield* waiter) noexcept {
  if (!waiter->queued_) return;
  if (waiter->previous_ != nullptr) {
    waiter->previous_->next_ = waiter->next_;
  } else {
    first_ = waiter->next_;
  }
  if (waiter->next_ != nullptr) {
    waiter->next_->previous_ = waiter->previous_;
  } else {
    last_ = waiter->previous_;
  }
  waiter->next_ = waiter->previous_ = nullptr;
  waiter->queued_ = false;
}

void LoopTurn::on_idle(void* argument) {
  auto* self = static_cast<LoopTurn*>(argument);
  const std::shared_ptr<bool> alive = self->alive_;
  const std::uint64_t round = self->round_++;
  // Why close first: a resumed caller that yields again opens a new handle, which runs on the
  // next iteration, after the loop polled.
  self->idle_.reset();
  // Why one at a time from the front, and only this round's: resuming a caller may destroy
  // later waiters' frames (which unlink themselves), and a caller that yields again waits for
  // the next round.
  self->resuming_ = true;
  while (*alive && self->first_ != nullptr && self->first_->round_ == round) {
    Yield* waiter = self->first_;
    self->unlink(waiter);
    waiter->waiter_.resume();
  }
  if (*alive) self->resuming_ = false;
}

}  // namespace redlimit::detail
