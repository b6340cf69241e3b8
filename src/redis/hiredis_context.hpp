#pragma once

#include <hiredis/async.h>
#include <uv.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "redis/endpoint.hpp"
#include "runtime/close_latch.hpp"

namespace redlimit::detail {

/// A hiredis async context being connected, or why none could be created.
struct OpenedContext {
  redisAsyncContext* context = nullptr;  ///< owned by the caller (redisAsyncFree) or hiredis
  std::string error;
};

/// Starts a non-blocking connect to `endpoint`, attached to `loop` through our glue (whose poll
/// handle reports to `latch` when closed), with TCP keepalive, `data` and both callbacks set.
OpenedContext open_context(const Endpoint& endpoint, uv_loop_t* loop,
                           std::shared_ptr<CloseLatch> latch, void* data,
                           redisConnectCallback* on_connect,
                           redisDisconnectCallback* on_disconnect);

/// Queues `argv` on `context` (binary-safe; the arguments are copied before this returns),
/// encoded as RESP in `buffer`, which the caller keeps to reuse its capacity.
/// Returns false when hiredis refuses (the context is closing): the callback will never run.
bool send_argv(redisAsyncContext* context, redisCallbackFn* callback, void* privdata,
               std::span<const std::string_view> argv, std::string& buffer);

}  // namespace redlimit::detail
