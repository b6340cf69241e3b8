#pragma once
/// @file call_log.hpp
/// A chaos worker's log of every call, one line per call (or per run of identical instant
/// answers of a failure policy).
///
/// Each line is written with its own write(2), unbuffered: the kernel keeps what was written when
/// the worker is killed (SIGKILL), so every decision from Redis and every lease granted before the
/// kill is in the log. Only an open run of a failure policy's answers (one per coroutine, never an
/// admission from Redis) is lost. Why not a stdio buffer flushed every 100 ms: up to 100 ms of
/// admissions vanished at a kill, and could hide a violation. Why not an mmap of the file: a
/// write(2) costs about 1.6 us against 0.1-0.2 us buffered, and a worker writes about 8,000
/// lines a second (about 1% of a core), which is not worth a mapping's growth and truncation.
///
/// Lines:
///   C <stream> <start_ns> <end_ns> <max_ns> <count> <permits> <outcome> <source> <server_us>
///   <burst> <waited_us> <wall_from_us> <wall_to_us>
///       outcome: A allowed, D denied, K cancelled, E:<error kind>; source: to_string(Source) or -
///       count > 1: a run of identical answers (permits included) not from Redis nor its deny
///       cache, and not admissions of a local fallback; start of the first, end of the last,
///       max_ns the longest of them
///       wall_*: the system clock when the call started and ended: a local fallback decides at
///       a time between them (it has no Redis time)
///   G <id> <granted_us> <expires_us> <permits> <granted_ns>
///                                          a semaphore lease granted by Redis, when granted; held
///                                          until its R line, else (its holder killed) its expiry
///   R <id> <end_us>                        the lease's end for the checker: written when its
///                                          release is sent (the earliest it may end), again when
///                                          answered (see worker.cpp release()); the last counts
///   H <stream> <start_ns>                  a call still running when the worker had to exit
///   END <ns>                               the worker ended cleanly
/// Times *_ns are CLOCK_MONOTONIC (shared by every process on the machine), *_us Redis TIME,
/// wall_* the system clock (Redis TIME is that clock of the same machine).

#include <chrono>
#include <cstdint>
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

/// Microseconds of the system clock: the clock a local fallback decides by
/// (LocalBackend::system_clock).
inline std::int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
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
  bool burst = false;             ///< one of the SIGUSR1 burst's acquire() calls
  std::int64_t waited_us = 0;     ///< Decision::waited: server_us - waited_us is when it reserved
  std::int64_t wall_from_us = 0;  ///< wall_us() at its start (of the first, for a run)
  std::int64_t wall_to_us = 0;    ///< wall_us() at its end (of the last, for a run)
};

/// Writes the lines above to one file. Not thread-safe: the worker's loop thread only.
class CallLog {
 public:
  explicit CallLog(const std::string& path);
  ~CallLog();
  CallLog(const CallLog&) = delete;
  CallLog& operator=(const CallLog&) = delete;

  /// Logs a call; consecutive identical answers of one coroutine (`lane`) not from Redis nor its
  /// deny cache, and not a local fallback's admissions (the checker needs the time of each), are
  /// merged into one line, so that a loop answered instantly by its failure policy costs little.
  void record(std::size_t lane, const CallRecord& record);
  /// Writes the pending merged run of `lane`, if any.
  void close_run(std::size_t lane);
  /// Logs a lease granted by Redis at `granted_us` (Redis TIME) and `granted_ns`.
  void grant(long id, std::int64_t granted_us, std::int64_t expires_us, std::int64_t permits,
             std::int64_t granted_ns);
  /// Logs the end of lease `id` (see the R line).
  void released(long id, std::int64_t end_us);
  void hanging(int stream, std::int64_t start_ns);
  void end();

 private:
  void write(const CallRecord& record);
  void line(const char* format, ...) __attribute__((format(printf, 2, 3)));

  int fd_;
  std::vector<CallRecord> runs_;
  std::vector<bool> run_open_;
};

}  // namespace redlimit::chaos
