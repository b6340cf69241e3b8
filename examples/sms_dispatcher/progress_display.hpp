#pragma once
// The live view of a run: per node and in total, sent, rate and ETA. On a terminal, progress
// bars redrawn in place; otherwise one plain line per second (for logs and CI).

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "node.hpp"

/// Draws what the nodes report. Call tick() every 250 ms and finish() once at the end.
class ProgressDisplay {
 public:
  using Clock = std::chrono::steady_clock;

  /// `terminal`: progress bars redrawn in place; else plain lines once a second.
  ProgressDisplay(bool terminal, Clock::time_point started);

  void tick(Clock::time_point now, const std::vector<NodeProgress>& nodes);
  /// Draws the final state (every line, whatever the mode).
  void finish(Clock::time_point now, const std::vector<NodeProgress>& nodes);

 private:
  struct Sample {
    Clock::time_point time;
    std::vector<std::int64_t> sent;  ///< per node, then the total
  };
  void remember(Clock::time_point now, const std::vector<NodeProgress>& nodes);
  /// Messages per second for node `index` (nodes.size(): the total): over the last two seconds
  /// while it sends; once it has sent everything, over the whole run.
  double rate(std::size_t index, const NodeProgress& progress) const;
  void draw_bars(const std::vector<NodeProgress>& nodes);
  void draw_line(Clock::time_point now, const std::vector<NodeProgress>& nodes);

  bool terminal_;
  Clock::time_point started_;
  Clock::time_point last_line_;
  std::deque<Sample> samples_;
  int lines_drawn_ = 0;
};
