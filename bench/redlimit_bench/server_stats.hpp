#pragma once
// What Redis says about a run: the server time per EVALSHA (INFO commandstats) and the memory
// a limiter key takes (MEMORY USAGE).

#include <optional>
#include <string>
#include <vector>

#include "redlimit/redlimit.hpp"

/// CONFIG RESETSTAT: commandstats count from here.
redlimit::Task<void> reset_server_stats(redlimit::Client& client);

/// usec_per_call of EVALSHA since the last reset; nullopt if none ran.
redlimit::Task<std::optional<double>> evalsha_usec_per_call(redlimit::Client& client);

/// The mean MEMORY USAGE (SAMPLES 0) of those of `keys` that exist; nullopt if none does.
redlimit::Task<std::optional<double>> mean_key_bytes(redlimit::Client& client,
                                                     std::vector<std::string> keys);
