#pragma once
// Counting events in a trailing window, as the mock provider does to enforce its limit.

#include <chrono>
#include <cstddef>
#include <deque>

/// Events in the trailing window (now - length, now], and the most ever seen in one.
class TrailingWindow {
 public:
  using Clock = std::chrono::steady_clock;

  explicit TrailingWindow(Clock::duration length) : length_(length) {}

  /// Events in (now - length, now]; forgets older ones.
  std::size_t count(Clock::time_point now) {
    while (!events_.empty() && events_.front() <= now - length_)
      events_.pop_front();
    return events_.size();
  }
  /// Records an event at `now` (not earlier than the last one).
  void add(Clock::time_point now) {
    events_.push_back(now);
    const std::size_t in_window = count(now);
    if (in_window > peak_) peak_ = in_window;
  }
  /// The most events seen in any window.
  std::size_t peak() const noexcept { return peak_; }

 private:
  Clock::duration length_;
  std::deque<Clock::time_point> events_;
  std::size_t peak_ = 0;
};
