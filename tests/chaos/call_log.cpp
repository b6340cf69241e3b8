#include "chaos/call_log.hpp"

#include <stdexcept>

namespace redlimit::chaos {

CallLog::CallLog(const std::string& path)
    : file_(std::fopen(path.c_str(), "w")), buffer_(1 << 20, '\0') {
  if (file_ == nullptr) throw std::runtime_error("cannot write " + path);
  std::setvbuf(file_, buffer_.data(), _IOFBF, buffer_.size());
}

CallLog::~CallLog() {
  for (std::size_t lane = 0; lane < runs_.size(); ++lane)
    close_run(lane);
  std::fclose(file_);
}

void CallLog::record(std::size_t lane, const CallRecord& record) {
  if (lane >= runs_.size()) {
    runs_.resize(lane + 1);
    run_open_.resize(lane + 1, false);
  }
  CallRecord& run = runs_[lane];
  // Why not Redis's and the deny cache's answers: the checker needs each one's own time (the
  // first decision after a fault); both come at most once per round trip or paced call.
  const bool mergeable =
      record.source != "redis" && record.source != "deny_cache" && record.count == 1;
  if (run_open_[lane] && mergeable && run.stream == record.stream &&
      run.outcome == record.outcome && run.source == record.source && run.burst == record.burst) {
    run.end_ns = record.end_ns;
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
  std::fprintf(file_, "C %d %lld %lld %lld %ld %lld %s %s %lld %d %lld\n", r.stream,
               static_cast<long long>(r.start_ns), static_cast<long long>(r.end_ns),
               static_cast<long long>(max_ns), r.count, static_cast<long long>(r.permits),
               r.outcome.c_str(), r.source.c_str(), static_cast<long long>(r.server_us),
               r.burst ? 1 : 0, static_cast<long long>(r.waited_us));
}

void CallLog::lease(std::int64_t granted_us, std::int64_t end_us, std::int64_t permits) {
  std::fprintf(file_, "L %lld %lld %lld\n", static_cast<long long>(granted_us),
               static_cast<long long>(end_us), static_cast<long long>(permits));
}

void CallLog::hanging(int stream, std::int64_t start_ns) {
  std::fprintf(file_, "H %d %lld\n", stream, static_cast<long long>(start_ns));
}

void CallLog::end() {
  for (std::size_t lane = 0; lane < runs_.size(); ++lane)
    close_run(lane);
  std::fprintf(file_, "END %lld\n", static_cast<long long>(monotonic_ns()));
  flush();
}

}  // namespace redlimit::chaos
