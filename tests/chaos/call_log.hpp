#pragma once
/// @file call_log.hpp
/// A chaos worker's log of every call, one line per call (or per run of identical instant
/// answers of a failure policy), written through a large stdio buffer and flushed by the worker.
///
/// Lines:
///   C <stream> <start_ns> <end_ns> <max_ns> <count> <permits> <outcome> <source> <server_us>
///   <burst> <waited_us>
///       outcome: A allowed, D denied, K cancelled, E:<error kind>; source: to_string(Source) or -
///       count > 1: a run of identical answers not from Redis nor its deny cache; start of the
///       first, end of the last, max_ns the longest of them
///   L <granted_us> <end_us> <permits>      a semaphore lease from Redis, until release or expiry
///   H <stream> <start_ns>                  a call still running when the worker had to exit
///   END <ns>                               the worker ended cleanly
/// Times *_ns are CLOCK_MONOTONIC (shared by every process on the machine), *_us Redis TIME.

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/redlimit.hpp"

namespace redlimit::chaos {

/// Nanoseconds of CLOCK_MONOTONIC (std::chrono::steady_clock on Linux).
inline std::int64_t monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// One finished call (or a run of them).
struct CallRecord {
  int stream = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::int64_t max_ns = 0;
  long count = 1;
  std::int64_t permits = 1;
  std::string outcome;  ///< A, D, K or E:<kind>
  std::string source;   ///< to_string(Source), or "-" for an error
  std::int64_t server_us = 0;
  bool burst = false;          ///< one of the SIGUSR1 burst's acquire() calls
  std::int64_t waited_us = 0;  ///< Decision::waited: server_us - waited_us is when it reserved
};

/// Writes the lines above to one file. Not thread-safe: the worker's loop thread only.
class CallLog {
 public:
  explicit CallLog(const std::string& path);
  ~CallLog();
  CallLog(const CallLog&) = delete;
  CallLog& operator=(const CallLog&) = delete;

  /// Logs a call; consecutive identical answers of one coroutine not from Redis nor its deny cache
  /// (`lane`) are merged into one line, so that a loop answered instantly by its failure policy
  /// costs little.
  void record(std::size_t lane, const CallRecord& record);
  /// Writes the pending merged run of `lane`, if any.
  void close_run(std::size_t lane);
  void lease(std::int64_t granted_us, std::int64_t end_us, std::int64_t permits);
  void hanging(int stream, std::int64_t start_ns);
  void end();
  void flush() { std::fflush(file_); }

 private:
  void write(const CallRecord& record);

  std::FILE* file_;
  std::string buffer_;  // Why: setvbuf's buffer must outlive the FILE, so it is a member
  std::vector<CallRecord> runs_;
  std::vector<bool> run_open_;
};

}  // namespace redlimit::chaos
