#pragma once
// The mock SMS provider: a TCP server that accepts a message only if fewer than `limit` were
// accepted in the trailing second, and otherwise rejects it and counts the loss.
//
// Protocol, one line each way per message: "SEND <node> <seq> <sent_us>\n" -> "OK\n" or
// "REJECT\n"; <sent_us> is the node's steady clock when it sent the message (CLOCK_MONOTONIC,
// one clock for every process of the machine).

#include <uv.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trailing_window.hpp"

/// What the provider saw.
struct ProviderReport {
  std::int64_t accepted = 0;
  std::int64_t rejected = 0;
  std::size_t peak_arrivals = 0;  ///< the most messages that arrived in any 1 s window
  std::size_t peak_accepted = 0;  ///< the most accepted in any 1 s window (<= limit)
  /// The most messages sent in any 1 s window, by the nodes' send times: what the limiter let
  /// through. More arrived than this only on the way, or because the provider read late.
  std::size_t peak_sent = 0;
};

/// Listens on 127.0.0.1. Use on the loop's thread.
class Provider {
 public:
  Provider(uv_loop_t* loop, int limit_per_second);
  Provider(const Provider&) = delete;
  Provider& operator=(const Provider&) = delete;
  ~Provider();

  /// Starts listening on `port` (0: any free port) and returns the port.
  int listen(int port);
  /// Stops listening and closes every connection; the loop then finishes by itself.
  void close();
  ProviderReport report() const;

 private:
  struct Connection;
  static void on_connection(uv_stream_t* server, int status);
  void on_line(Connection& connection, const std::string& line);

  uv_loop_t* loop_;
  std::size_t limit_;
  uv_tcp_t* server_;                   ///< on the heap: freed in its close callback
  Connection* connections_ = nullptr;  ///< an intrusive list of the open connections
  TrailingWindow accepted_window_;
  TrailingWindow arrivals_window_;
  std::vector<std::int64_t> sent_us_;  ///< every message's send time, in arrival order
  std::int64_t accepted_ = 0;
  std::int64_t rejected_ = 0;
  bool closed_ = false;
};
