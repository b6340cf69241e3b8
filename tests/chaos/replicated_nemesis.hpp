#pragma once
/// @file replicated_nemesis.hpp
/// The nemesis of a replicated deployment (a primary, its replica and three sentinels): makes
/// the faults of replicated_fault_kinds, each ending when the deployment is whole again.

#include <chrono>

#include "chaos/fleet.hpp"
#include "chaos/nemesis.hpp"
#include "chaos/run_record.hpp"
#include "support/sentinel_group.hpp"

namespace redlimit::chaos {

/// How long the deployment may take to be whole again after a fault (a kill waits for the
/// sentinels' 5 s down-after, then the new replica's full sync).
inline constexpr std::chrono::seconds whole_again_timeout{60};

class ReplicatedNemesis {
 public:
  ReplicatedNemesis(test::SentinelGroup& group, Fleet& fleet) : group_(group), fleet_(fleet) {}

  /// Makes `fault`; returns when it is undone and the primary the sentinels name has a replica
  /// that acknowledges its writes (the fault's end: recovery is measured from there).
  FaultRun inject(const Fault& fault);

 private:
  test::SentinelGroup& group_;
  Fleet& fleet_;
};

}  // namespace redlimit::chaos
