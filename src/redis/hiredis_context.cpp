#include "redis/hiredis_context.hpp"

#include <cstring>
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

// Why a shortcut below 100: nearly every count and length in a command is.
std::size_t decimal_digits(std::size_t number) {
  if (number < 10) return 1;
  if (number < 100) return 2;
  std::size_t digits = 3;
  for (number /= 1000; number > 0; number /= 10)
    ++digits;
  return digits;
}

/// Writes `kind`, `number` in decimal and CRLF at `out`; returns the end.
char* write_header(char* out, char kind, std::size_t number) {
  *out++ = kind;
  if (number < 10) {
    out[0] = static_cast<char>('0' + number);
    out[1] = '\r';
    out[2] = '\n';
    return out + 3;
  }
  char* const end = out + decimal_digits(number);
  for (char* digit = end; digit != out; number /= 10)
    *--digit = static_cast<char>('0' + number % 10);
  end[0] = '\r';
  end[1] = '\n';
  return end + 2;
}

}  // namespace

bool send_argv(redisAsyncContext* context, redisCallbackFn* callback, void* privdata,
               std::span<const std::string_view> argv, std::string& command) {
  // Why our own RESP encoding into the caller's reused buffer, sized once and written in
  // place: hiredis's formatting (sdscatfmt, and a fresh buffer per command), then appends to
  // a std::string piece by piece, each cost a tenth of the client's CPU per decision.
  std::size_t size = 3 + decimal_digits(argv.size());
  for (const std::string_view part : argv)
    size += 5 + decimal_digits(part.size()) + part.size();
  command.resize(size);
  char* out = write_header(command.data(), '*', argv.size());
  for (const std::string_view part : argv) {
    out = write_header(out, '$', part.size());
    if (!part.empty())
      out = static_cast<char*>(std::memcpy(out, part.data(), part.size())) + part.size();
    out[0] = '\r';
    out[1] = '\n';
    out += 2;
  }
  return redisAsyncFormattedCommand(context, callback, privdata, command.data(), command.size()) ==
         REDIS_OK;
}

}  // namespace redlimit::detail
