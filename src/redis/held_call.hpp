#pragma once

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "redis/script_source.hpp"
#include "redlimit/reply.hpp"

namespace redlimit::detail {

/// A script call that a Holder (the limiters' batching) holds before it is sent, awaited with
/// `co_await`. It lives in the frame of the command that waits (CommandDispatcher::eval_held),
/// which the holder resumes either answered (the call went in a batch: `reply` or `error`) or
/// `alone`, to be sent as it would have been without a holder. Why in that frame: a call sent
/// alone then costs no coroutine frame of its own.
class HeldCall {
 public:
  using Clock = std::chrono::steady_clock;

  /// Who holds calls.
  class Holder {
   public:
    /// Takes `call`, whose `waiter` is set; false when it takes none (the call goes alone now).
    virtual bool hold(HeldCall& call) = 0;

   protected:
    ~Holder() = default;
  };

  HeldCall(Holder& holder, std::optional<std::uint16_t> slot, const scripts::ScriptSource& script,
           std::span<const std::string_view> keys, std::span<const std::string_view> args,
           Clock::time_point deadline) noexcept
      : slot(slot), script(&script), keys(keys), args(args), deadline(deadline), holder_(holder) {}
  /// Clears the holder's places of the call. Why: a frame destroyed while its call is held
  /// must be neither resumed nor read.
  ~HeldCall() {
    if (list != nullptr) (*list)[index] = nullptr;
    if (in_batch != nullptr) *in_batch = nullptr;
  }
  HeldCall(const HeldCall&) = delete;
  HeldCall& operator=(const HeldCall&) = delete;

  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> caller) {
    waiter = caller;
    return holder_.hold(*this);
  }
  void await_resume() const noexcept {}

  /// The reply, or rethrows the error (when answered).
  Reply take_reply() {
    if (error) std::rethrow_exception(error);
    return std::move(reply);
  }

  // What the call is.
  const std::optional<std::uint16_t> slot;  ///< the slot of its first key (none on one server)
  const scripts::ScriptSource* const script;
  const std::span<const std::string_view> keys;
  const std::span<const std::string_view> args;
  const Clock::time_point deadline;

  // The holder's.
  std::coroutine_handle<> waiter;          ///< the command's coroutine, while held
  std::vector<HeldCall*>* list = nullptr;  ///< a list it waits in (its place cleared with it)
  std::size_t index = 0;                   ///< its place there
  HeldCall** in_batch = nullptr;           ///< its place in a batch (cleared with it)
  bool alone = false;                      ///< resumed to be sent alone
  Reply reply;
  std::exception_ptr error;

 private:
  Holder& holder_;
};

}  // namespace redlimit::detail
