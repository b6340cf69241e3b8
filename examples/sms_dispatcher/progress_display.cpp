#include "progress_display.hpp"

#include <cstdio>

namespace {

constexpr int bar_width = 30;
/// Rates are measured over this much of the recent past: nodes report every 200 ms, so a
/// shorter span would show their reporting jitter rather than their rate.
constexpr auto rate_span = std::chrono::seconds(2);

std::string bar(std::int64_t done, std::int64_t total) {
  const int filled = total > 0 ? static_cast<int>(bar_width * done / total) : bar_width;
  return "[" + std::string(filled, '#') + std::string(bar_width - filled, '-') + "]";
}

std::string eta(std::int64_t remaining, double rate) {
  if (remaining == 0) return "done";
  if (rate < 0.5) return "ETA  -";
  char text[32];
  std::snprintf(text, sizeof text, "ETA %3.0f s", static_cast<double>(remaining) / rate);
  return text;
}

NodeProgress total_of(const std::vector<NodeProgress>& nodes) {
  NodeProgress total;
  for (const NodeProgress& node : nodes) {
    total.queued += node.queued;
    total.sent += node.sent;
    total.accepted += node.accepted;
    total.rejected += node.rejected;
  }
  return total;
}

}  // namespace

ProgressDisplay::ProgressDisplay(bool terminal, Clock::time_point started)
    : terminal_(terminal), started_(started), last_line_(started) {}

void ProgressDisplay::tick(Clock::time_point now, const std::vector<NodeProgress>& nodes) {
  remember(now, nodes);
  if (terminal_) {
    draw_bars(nodes);
  } else if (now - last_line_ >= std::chrono::seconds(1)) {
    last_line_ = now;
    draw_line(now, nodes);
  }
}

void ProgressDisplay::finish(Clock::time_point now, const std::vector<NodeProgress>& nodes) {
  remember(now, nodes);
  if (terminal_) {
    draw_bars(nodes);
  } else {
    draw_line(now, nodes);
  }
}

void ProgressDisplay::remember(Clock::time_point now, const std::vector<NodeProgress>& nodes) {
  Sample sample{now, {}};
  for (const NodeProgress& node : nodes)
    sample.sent.push_back(node.sent);
  sample.sent.push_back(total_of(nodes).sent);
  samples_.push_back(std::move(sample));
  while (samples_.size() > 2 && now - samples_[1].time >= rate_span)
    samples_.pop_front();
}

double ProgressDisplay::rate(std::size_t index, const NodeProgress& progress) const {
  const Sample& last = samples_.back();
  if (progress.sent == progress.queued) {
    const double run = std::chrono::duration<double>(last.time - started_).count();
    return run > 0 ? static_cast<double>(progress.sent) / run : 0;
  }
  const Sample& first = samples_.front();
  const double seconds = std::chrono::duration<double>(last.time - first.time).count();
  if (seconds <= 0 || first.sent.size() != last.sent.size()) return 0;
  return static_cast<double>(last.sent[index] - first.sent[index]) / seconds;
}

void ProgressDisplay::draw_bars(const std::vector<NodeProgress>& nodes) {
  if (lines_drawn_ > 0) std::printf("\033[%dF", lines_drawn_);  // back to the first line
  const NodeProgress total = total_of(nodes);
  auto row = [](const std::string& name, const NodeProgress& p, double rate) {
    std::printf("\033[2K  %-7s %s %6lld/%-6lld %5.0f/s  rejected %-5lld %s\n", name.c_str(),
                bar(p.sent, p.queued).c_str(), static_cast<long long>(p.sent),
                static_cast<long long>(p.queued), rate, static_cast<long long>(p.rejected),
                eta(p.queued - p.sent, rate).c_str());
  };
  for (std::size_t i = 0; i < nodes.size(); ++i)
    row("node " + std::to_string(i + 1), nodes[i], rate(i, nodes[i]));
  row("total", total, rate(nodes.size(), total));
  lines_drawn_ = static_cast<int>(nodes.size()) + 1;
  std::fflush(stdout);
}

void ProgressDisplay::draw_line(Clock::time_point now, const std::vector<NodeProgress>& nodes) {
  const NodeProgress total = total_of(nodes);
  const double total_rate = rate(nodes.size(), total);
  std::printf("%6.1f s  sent %lld/%lld  %.0f/s  rejected %lld  %s  (per node:",
              std::chrono::duration<double>(now - started_).count(),
              static_cast<long long>(total.sent), static_cast<long long>(total.queued), total_rate,
              static_cast<long long>(total.rejected),
              eta(total.queued - total.sent, total_rate).c_str());
  for (std::size_t i = 0; i < nodes.size(); ++i)
    std::printf(" %.0f/s", rate(i, nodes[i]));
  std::printf(")\n");
  std::fflush(stdout);
}
