#pragma once
// The exact EVALSHA a limiter sends for one decision, so that redis-benchmark can run the same
// script with the same arguments as the ceiling redlimit is measured against.

#include <string>
#include <vector>

#include "redlimit/redlimit.hpp"

/// `EVALSHA <sha1> <arguments...>` for try_acquire(raw_key, 1) of a limiter named `name`
/// with prefix `prefix` and policy `policy` (the script reads the time from Redis).
struct DecideCommand {
  std::string sha1;
  std::vector<std::string> arguments;  ///< numkeys, keys, then ARGV
  std::string source;                  ///< the script's text, for SCRIPT LOAD
};

DecideCommand decide_command(const redlimit::Policy& policy, const std::string& prefix,
                             const std::string& name, const std::string& raw_key);
