#pragma once
// `sms_dispatcher provider --rate R`: the mock provider as its own process, started by the
// launcher. It writes on stdout, one line each:
//   listening <port>                                          once it accepts connections
//   report <accepted> <rejected> <peak_arrivals> <peak_accepted>    after SIGTERM or SIGINT

#include "provider.hpp"

/// Serves until SIGTERM or SIGINT; returns the exit code.
int run_provider_process(int rate);

/// Reads a "report ..." line into `report`; false if `line` is not one.
bool parse_provider_report(const std::string& line, ProviderReport& report);
