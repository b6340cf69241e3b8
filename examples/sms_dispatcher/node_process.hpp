#pragma once
// `sms_dispatcher node ...`: one dispatcher node as its own process, started by the launcher.
// It reports on stdout, one line at a time, for the launcher's display:
//   progress <sent> <accepted> <rejected> <errors>     every 200 ms
//   done <sent> <accepted> <rejected> <errors> <provider_lost 0|1>

#include "dispatch_settings.hpp"
#include "node.hpp"

/// Runs node `node.id` until its queue is sent and answered; returns the exit code (0: every
/// message answered; 1: the provider went away, Redis was unavailable for too long, or an error
/// that retrying cannot fix).
int run_node_process(const DispatchSettings& settings, const NodeSettings& node);
