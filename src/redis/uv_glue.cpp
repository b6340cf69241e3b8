#include "redis/uv_glue.hpp"

#include <hiredis/sds.h>
#include <sys/socket.h>

#include <cstring>
#include <memory>

#include "redis/sigpipe_guard.hpp"
#include "redlimit/runtime.hpp"
#include "runtime/uv_handle.hpp"

namespace redlimit::detail {
namespace {

/// One per hiredis context. Owner: hiredis, through the cleanup hook; freed when both handles'
/// close callbacks have run.
struct PollGlue {
  UvHandle<uv_poll_t> poll;
  UvHandle<uv_prepare_t> flush;  ///< writes what commands queued, just before the loop polls
  /// Active while the flush is, so that uv_backend_timeout() is 0 meanwhile (add_write()).
  UvHandle<uv_idle_t> awake;
  redisAsyncContext* context;  // null once hiredis has cleaned up
  int events = 0;              ///< what hiredis wants watched
  int polled = 0;              ///< what the poll handle watches
  bool guard_sigpipe;
  std::shared_ptr<CloseLatch> latch;
  bool flushing = false;  ///< inside the flush: a write hiredis could not finish needs the poll
  /// The socket took less than write_large_buffer_now() sent: it waits for hiredis's next write.
  bool socket_full = false;
  int open_handles = 3;
};

void write_now(PollGlue* glue) {
  glue->socket_full = false;
  SigpipeGuard guard(glue->guard_sigpipe);
  redisAsyncHandleWrite(glue->context);
  // A failed write makes hiredis set an error, and usually free the context (cleanup() then
  // clears glue->context).
  if (glue->context == nullptr || glue->context->c.err != 0) guard.write_failed();
}

/// A buffer this large (a batch of decisions, or many commands queued in one loop iteration)
/// is written as soon as it is queued.
constexpr std::size_t write_at_once_bytes = 2048;

// Why at once: a batch's command waiting for the end of the loop iteration leaves Redis idle
// while the client answers the rest of what it read; the two then take turns, each waiting for
// the other (a batch sent as soon as its callers have queued it keeps Redis busy meanwhile).
// Why not redisAsyncHandleWrite: this runs inside hiredis (a command queued from a reply's
// callback), and a write error there would make hiredis free the context under its caller.
// So the bytes go with one non-blocking send; whatever it leaves (the socket full, an error) stays
// in the buffer for the flush before the poll, which writes through hiredis. Why socket_full:
// once the socket took less, each command queued after would try again, and move the rest of
// the buffer each time; it waits for hiredis's write instead. Why not after an error (hiredis
// could not append a command, out of memory): the flush then drops the connection and fails
// every command queued, which must not have reached Redis.
void write_large_buffer_now(PollGlue* glue) {
  redisContext* c = &glue->context->c;
  const std::size_t length = sdslen(c->obuf);
  if (length < write_at_once_bytes || glue->socket_full || c->err != 0) return;
  const ssize_t written = send(c->fd, c->obuf, length, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (written < static_cast<ssize_t>(length)) glue->socket_full = true;
  if (written <= 0) return;
  const std::size_t left = length - static_cast<std::size_t>(written);
  std::memmove(c->obuf, c->obuf + written, left);
  sdssetlen(c->obuf, left);
  c->obuf[left] = '\0';
}

void on_poll(uv_poll_t* poll, int status, int events) {
  auto* glue = static_cast<PollGlue*>(poll->data);
  LoopScope scope;
  // Why: on a socket error libuv passes status < 0 and no events (and stops the handle);
  // handing hiredis the events it asked for makes it read or write and see the error.
  const int ready = status < 0 ? glue->events : events;
  if (status < 0) glue->polled = 0;  // libuv stopped the handle
  if (glue->context != nullptr && (ready & UV_READABLE)) redisAsyncHandleRead(glue->context);
  if (glue->context != nullptr && (ready & UV_WRITABLE)) write_now(glue);
}

void on_awake(uv_idle_t* awake) {
  uv_idle_stop(awake);
}

void on_flush(uv_prepare_t* flush) {
  auto* glue = static_cast<PollGlue*>(flush->data);
  uv_prepare_stop(flush);
  uv_idle_stop(glue->awake.get());
  if (glue->context == nullptr) return;
  LoopScope scope;
  glue->flushing = true;
  write_now(glue);
  glue->flushing = false;
}

// Why only on a change: uv_poll_start registers the socket with epoll anew each time (an
// epoll_ctl to remove it and one or two to add it), and hiredis asks for reads again after
// every read and drops writes after every write.
void update(PollGlue* glue) {
  if (glue->events == glue->polled) return;
  glue->polled = glue->events;
  if (glue->events != 0) {
    uv_poll_start(glue->poll.get(), glue->events, &on_poll);
  } else {
    uv_poll_stop(glue->poll.get());
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

// Why a prepare handle: commands are written once per loop iteration, all together, just
// before the loop polls, instead of each waiting for the poll to report the socket writable
// (two epoll_ctl calls and a loop iteration per command). Only a connected socket is written
// this way; a connect in progress, or a write the socket could not take whole, waits for the
// poll as before. A large buffer is written at once (write_large_buffer_now); the flush still
// runs, for what it left and for hiredis to watch the socket for the reply.
// Why the idle handle too: uv_backend_timeout() counts idle handles, not prepare ones, and a
// program that runs the loop a turn at a time inside another event loop (UV_RUN_NOWAIT, then
// waits on uv_backend_fd() for that long) would otherwise wait for the next timer before the
// flush runs, when a command was queued after the loop's own prepare phase (from a reply's
// callback). uv_run() itself computes its wait after the prepare phase, which stops both: it
// waits as long as without.
void add_write(void* data) {
  auto* glue = static_cast<PollGlue*>(data);
  if (!glue->flushing && (glue->context->c.flags & REDIS_CONNECTED)) {
    write_large_buffer_now(glue);
    uv_prepare_start(glue->flush.get(), &on_flush);
    uv_idle_start(glue->awake.get(), &on_awake);
    return;
  }
  glue->events |= UV_WRITABLE;
  update(glue);
}

void del_write(void* data) {
  auto* glue = static_cast<PollGlue*>(data);
  glue->events &= ~UV_WRITABLE;
  update(glue);
}

void on_closed(void* data) noexcept {
  auto* closed = static_cast<PollGlue*>(data);
  if (--closed->open_handles > 0) return;
  const std::shared_ptr<CloseLatch> latch = std::move(closed->latch);
  delete closed;
  latch->closed();
}

void cleanup(void* data) {
  auto* glue = static_cast<PollGlue*>(data);
  glue->context = nullptr;
  glue->poll.close();
  glue->flush.close();
  glue->awake.close();
}

}  // namespace

bool attach_to_loop(redisAsyncContext* context, uv_loop_t* loop,
                    std::shared_ptr<CloseLatch> latch) {
  auto made = std::unique_ptr<PollGlue>(new PollGlue{.poll = {},
                                                     .flush = {},
                                                     .awake = {},
                                                     .context = context,
                                                     .guard_sigpipe = !sigpipe_ignored(),
                                                     .latch = std::move(latch)});
  try {
    made->poll.init(loop, &uv_poll_init_socket, context->c.fd);
    made->flush.init(loop, &uv_prepare_init);
    made->awake.init(loop, &uv_idle_init);
  } catch (const UvError&) {
    return false;  // a handle made closes with `made`, unseen by the latch
  }
  PollGlue* const glue = made.release();  // freed by on_closed, after hiredis's cleanup
  for (uv_handle_t* handle : {glue->poll.handle(), glue->flush.handle(), glue->awake.handle()})
    handle->data = glue;
  glue->poll.when_closed(&on_closed, glue);
  glue->flush.when_closed(&on_closed, glue);
  glue->awake.when_closed(&on_closed, glue);
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
