#include "redis/uv_glue.hpp"

#include "redis/sigpipe_guard.hpp"
#include "redlimit/runtime.hpp"

namespace redlimit::detail {
namespace {

/// One per hiredis context. Owner: hiredis, through the cleanup hook; freed in the poll
/// handle's close callback.
struct PollGlue {
  uv_poll_t poll;
  redisAsyncContext* context;  // null once hiredis has cleaned up
  int events = 0;
  bool guard_sigpipe;
  std::shared_ptr<CloseLatch> latch;
};

void on_poll(uv_poll_t* poll, int status, int events) {
  auto* glue = static_cast<PollGlue*>(poll->data);
  LoopScope scope;
  // Why: on a socket error libuv passes status < 0 and no events (and stops the handle);
  // handing hiredis the events it asked for makes it read or write and see the error.
  const int ready = status < 0 ? glue->events : events;
  if (glue->context != nullptr && (ready & UV_READABLE)) redisAsyncHandleRead(glue->context);
  if (glue->context != nullptr && (ready & UV_WRITABLE)) {
    SigpipeGuard guard(glue->guard_sigpipe);
    redisAsyncHandleWrite(glue->context);
  }
}

void update(PollGlue* glue) {
  if (glue->events != 0) {
    uv_poll_start(&glue->poll, glue->events, &on_poll);
  } else {
    uv_poll_stop(&glue->poll);
  }
}

void add_read(void* data) {
  auto* glue = static_cast<PollGlue*>(data);
  glue->events |= UV_READABLE;
  update(glue);
}

void del_read(void* data) {
  auto* glue = static_cast<PollGlue*>(data);
  glue->events &= ~UV_READABLE;
  update(glue);
}

void add_write(void* data) {
  auto* glue = static_cast<PollGlue*>(data);
  glue->events |= UV_WRITABLE;
  update(glue);
}

void del_write(void* data) {
  auto* glue = static_cast<PollGlue*>(data);
  glue->events &= ~UV_WRITABLE;
  update(glue);
}

void cleanup(void* data) {
  auto* glue = static_cast<PollGlue*>(data);
  glue->context = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(&glue->poll), [](uv_handle_t* handle) {
    auto* closed = static_cast<PollGlue*>(handle->data);
    const std::shared_ptr<CloseLatch> latch = std::move(closed->latch);
    delete closed;
    latch->closed();
  });
}

}  // namespace

bool attach_to_loop(redisAsyncContext* context, uv_loop_t* loop,
                    std::shared_ptr<CloseLatch> latch) {
  auto* glue = new PollGlue{{}, context, 0, !sigpipe_ignored(), std::move(latch)};
  if (uv_poll_init_socket(loop, &glue->poll, context->c.fd) != 0) {
    delete glue;
    return false;
  }
  glue->poll.data = glue;
  glue->latch->opened();
  context->ev.data = glue;
  context->ev.addRead = &add_read;
  context->ev.delRead = &del_read;
  context->ev.addWrite = &add_write;
  context->ev.delWrite = &del_write;
  context->ev.cleanup = &cleanup;
  return true;
}

}  // namespace redlimit::detail
