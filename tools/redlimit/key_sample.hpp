#pragma once
// A bounded sample of a limiter's keys, by SCAN.

#include <cstddef>
#include <stop_token>
#include <string>
#include <vector>

#include "redlimit/client.hpp"
#include "redlimit/task.hpp"

namespace redlimit_cli {

/// The keys of a limiter that a SCAN found.
struct KeySample {
  /// Distinct raw keys, in the order found.
  std::vector<std::string> keys;
  /// Keys seen whose raw form is unknown (stored as a digest, being long).
  std::size_t digests = 0;
  /// True when the SCAN went through every key: `keys` are all of them.
  bool complete = false;
  /// True when a stop request ended the SCAN before its bounds did.
  bool interrupted = false;
};

/// What bounds a sample.
struct SampleBounds {
  /// Distinct keys at most.
  std::size_t keys = 1000;
  /// Redis keys the SCAN examines at most (matching or not; SCAN's COUNT is 1000 a call): what
  /// bounds the work in a large keyspace where the limiter's keys are few.
  std::size_t examined = 100'000;
};

/// Distinct keys of limiter `name` (overall scope), by SCAN with MATCH on one server, within
/// `bounds`. Stops early on a stop request (the sample is then not complete).
redlimit::Task<KeySample> sample_keys(redlimit::Client& client, std::string prefix,
                                      std::string name, SampleBounds bounds, std::stop_token stop);

}  // namespace redlimit_cli
