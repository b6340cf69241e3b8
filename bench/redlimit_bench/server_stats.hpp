#pragma once
// What Redis says about a run: the server time per EVALSHA (INFO commandstats) and the memory
// a limiter key takes (MEMORY USAGE).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "redlimit/redlimit.hpp"

/// CONFIG RESETSTAT: commandstats count from here.
redlimit::Task<void> reset_server_stats(redlimit::Client& client);

/// EVALSHA's counters in INFO commandstats since the last reset.
struct EvalshaStats {
  std::int64_t calls = 0;    ///< EVALSHA calls (a batch is one)
  std::int64_t usec = 0;     ///< the server's total time in them
  double usec_per_call = 0;  ///< as Redis reports it
};

/// EVALSHA's counters since the last reset; nullopt if none ran.
redlimit::Task<std::optional<EvalshaStats>> evalsha_stats(redlimit::Client& client);

/// The mean MEMORY USAGE (SAMPLES 0) of those of `keys` that exist; nullopt if none does.
redlimit::Task<std::optional<double>> mean_key_bytes(redlimit::Client& client,
                                                     std::vector<std::string> keys);
