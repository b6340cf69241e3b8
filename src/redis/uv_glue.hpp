#pragma once

#include <hiredis/async.h>
#include <uv.h>

#include <memory>

#include "runtime/close_latch.hpp"

namespace redlimit::detail {

/// Attaches a hiredis async context to a libuv loop through the five `ac->ev` hooks, with one
/// uv_poll_t per context, and a uv_prepare_t that writes the commands queued on a connected
/// socket once per loop iteration, just before the loop polls (with a uv_idle_t active until
/// then, so that uv_backend_timeout() does not wait past it). Unlike the adapter hiredis 0.14
/// ships, poll errors reach hiredis (it then reads or writes and sees the socket error), so a
/// refused connect or a reset completes every pending command. Writes never raise SIGPIPE (see
/// SigpipeGuard). The handles are closed through hiredis's cleanup hook and report to `latch` when
/// their close callbacks ran (shared: they may close after the latch's owner has gone). Returns
/// false when the poll handle cannot be created; the context is then untouched.
bool attach_to_loop(redisAsyncContext* context, uv_loop_t* loop, std::shared_ptr<CloseLatch> latch);

}  // namespace redlimit::detail
