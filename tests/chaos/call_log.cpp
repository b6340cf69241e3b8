#include "chaos/call_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <stdexcept>

namespace redlimit::chaos {

CallLog::CallLog(const std::string& path)
    : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) {
  if (fd_ < 0) throw std::runtime_error("cannot write " + path);
}

CallLog::~CallLog() {
  for (std::size_t lane = 0; lane < runs_.size(); ++lane)
    close_run(lane);
  ::close(fd_);
}

void CallLog::line(const char* format, ...) {
  char text[256];
  std::va_list args;
  va_start(args, format);
  const int length = std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  // Why one write(2) per line: a line is then whole or absent after a SIGKILL, and the checker
  // drops a cut one anyway.
  if (length > 0 &&
      ::write(fd_, text, std::min(static_cast<std::size_t>(length), sizeof text - 1)) < 0)
    std::perror("chaos call log");
}

void CallLog::record(std::size_t lane, const CallRecord& record) {
  if (lane >= runs_.size()) {
    runs_.resize(lane + 1);
    run_open_.resize(lane + 1, false);
  }
  CallRecord& run = runs_[lane];
  // Why not Redis's and the deny cache's answers: the checker needs each one's own time (the
  // first decision after a fault); both come at most once per round trip or paced call. Why
  // not a fallback's admissions: the checker places each in its window; they come at most a
  // process's share of the limit.
  const bool fallback_admission = record.source == "fallback" && record.outcome == "A";
  const bool mergeable = record.source != "redis" && record.source != "deny_cache" &&
                         !fallback_admission && record.count == 1;
  if (run_open_[lane] && mergeable && run.stream == record.stream &&
      run.outcome == record.outcome && run.source == record.source && run.burst == record.burst &&
      run.permits == record.permits) {
    run.end_ns = record.end_ns;
    run.wall_to_us = record.wall_to_us;
    run.max_ns = std::max(run.max_ns, record.end_ns - record.start_ns);
    ++run.count;
    return;
  }
  close_run(lane);
  if (mergeable) {
    run = record;
    run.max_ns = record.end_ns - record.start_ns;
    run_open_[lane] = true;
  } else {
    write(record);
  }
}

void CallLog::close_run(std::size_t lane) {
  if (lane < run_open_.size() && run_open_[lane]) {
    write(runs_[lane]);
    run_open_[lane] = false;
  }
}

void CallLog::write(const CallRecord& r) {
  const std::int64_t max_ns = r.count > 1 ? r.max_ns : r.end_ns - r.start_ns;
  line("C %d %lld %lld %lld %ld %lld %s %s %lld %d %lld %lld %lld\n", r.stream,
       static_cast<long long>(r.start_ns), static_cast<long long>(r.end_ns),
       static_cast<long long>(max_ns), r.count, static_cast<long long>(r.permits),
       r.outcome.c_str(), r.source.c_str(), static_cast<long long>(r.server_us), r.burst ? 1 : 0,
       static_cast<long long>(r.waited_us), static_cast<long long>(r.wall_from_us),
       static_cast<long long>(r.wall_to_us));
}

void CallLog::grant(long id, std::int64_t granted_us, std::int64_t expires_us, std::int64_t permits,
                    std::int64_t granted_ns) {
  line("G %ld %lld %lld %lld %lld\n", id, static_cast<long long>(granted_us),
       static_cast<long long>(expires_us), static_cast<long long>(permits),
       static_cast<long long>(granted_ns));
}

void CallLog::released(long id, std::int64_t end_us) {
  line("R %ld %lld\n", id, static_cast<long long>(end_us));
}

void CallLog::hanging(int stream, std::int64_t start_ns) {
  line("H %d %lld\n", stream, static_cast<long long>(start_ns));
}

void CallLog::end() {
  for (std::size_t lane = 0; lane < runs_.size(); ++lane)
    close_run(lane);
  line("END %lld\n", static_cast<long long>(monotonic_ns()));
}

}  // namespace redlimit::chaos
