#include "redis/hiredis_context.hpp"

#include <vector>

#include "redis/uv_glue.hpp"

namespace redlimit::detail {

OpenedContext open_context(const Endpoint& endpoint, uv_loop_t* loop,
                           std::shared_ptr<CloseLatch> latch, void* data,
                           redisConnectCallback* on_connect,
                           redisDisconnectCallback* on_disconnect) {
  redisAsyncContext* context = endpoint.transport == Endpoint::Transport::tcp
                                   ? redisAsyncConnect(endpoint.host.c_str(), endpoint.port)
                                   : redisAsyncConnectUnix(endpoint.path.c_str());
  if (context == nullptr) return {nullptr, "out of memory"};
  if (context->err != 0) {
    std::string why = context->errstr;
    redisAsyncFree(context);
    return {nullptr, "cannot connect to " + endpoint.display() + ": " + why};
  }
  if (!attach_to_loop(context, loop, std::move(latch))) {
    redisAsyncFree(context);
    return {nullptr, "cannot watch the socket to " + endpoint.display()};
  }
  if (endpoint.transport == Endpoint::Transport::tcp) redisEnableKeepAlive(&context->c);
  context->data = data;
  // Why this order: hiredis reports the connect on the first I/O event, which it asks for when
  // the connect callback is set, so the glue must be attached first.
  redisAsyncSetConnectCallback(context, on_connect);
  redisAsyncSetDisconnectCallback(context, on_disconnect);
  return {context, {}};
}

bool send_argv(redisAsyncContext* context, redisCallbackFn* callback, void* privdata,
               std::span<const std::string_view> argv) {
  constexpr std::size_t inline_capacity = 32;
  const char* inline_pointers[inline_capacity];
  std::size_t inline_lengths[inline_capacity];
  std::vector<const char*> heap_pointers;
  std::vector<std::size_t> heap_lengths;
  const char** pointers = inline_pointers;
  std::size_t* lengths = inline_lengths;
  if (argv.size() > inline_capacity) {
    heap_pointers.resize(argv.size());
    heap_lengths.resize(argv.size());
    pointers = heap_pointers.data();
    lengths = heap_lengths.data();
  }
  for (std::size_t i = 0; i < argv.size(); ++i) {
    pointers[i] = argv[i].empty() ? "" : argv[i].data();
    lengths[i] = argv[i].size();
  }
  return redisAsyncCommandArgv(context, callback, privdata, static_cast<int>(argv.size()), pointers,
                               lengths) == REDIS_OK;
}

}  // namespace redlimit::detail
