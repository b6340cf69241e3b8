#include "redis/hiredis_context.hpp"

#include <charconv>
#include <string>

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

namespace {

void append_header(std::string& out, char kind, std::size_t number) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, number).ptr;
  out += kind;
  out.append(digits, end);
  out += "\r\n";
}

}  // namespace

bool send_argv(redisAsyncContext* context, redisCallbackFn* callback, void* privdata,
               std::span<const std::string_view> argv) {
  // Why our own RESP encoding into a reused buffer: hiredis's formatting (sdscatfmt, and a
  // fresh buffer per command) was a tenth of the client's CPU per decision.
  thread_local std::string command;
  command.clear();
  append_header(command, '*', argv.size());
  for (const std::string_view part : argv) {
    append_header(command, '$', part.size());
    command.append(part);
    command += "\r\n";
  }
  return redisAsyncFormattedCommand(context, callback, privdata, command.data(), command.size()) ==
         REDIS_OK;
}

}  // namespace redlimit::detail
