#pragma once
/// @file policy_store.hpp
/// PolicyStore: policies kept in Redis, one per limiter name, followed by every process.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "redlimit/limit.hpp"
#include "redlimit/task.hpp"

namespace redlimit {

class Client;

/// A policy as stored: what it is, and where it stands among the changes of its name.
struct PolicyRecord {
  Policy policy;
  /// The name's version made by the change that stored it: every change of the name (its
  /// policy, an override, a removal) makes a larger one. A restart that lost the store starts
  /// them again (unless a key written under a later one moves them past it): with since_us, it
  /// tells one change from another.
  std::int64_t version = 0;
  /// The Redis time of the change (microseconds since the epoch).
  std::int64_t since_us = 0;
  /// How keys' state written under the previous policy carries over.
  Carry carry = Carry::as_is;
  friend bool operator==(const PolicyRecord&, const PolicyRecord&) = default;
};

/// The removal of a key's override: from then on the key follows the name's policy.
struct OverrideRemoval {
  /// The name's version made by the removal.
  std::int64_t version = 0;
  /// The Redis time of the removal (microseconds since the epoch).
  std::int64_t since_us = 0;
  friend bool operator==(const OverrideRemoval&, const OverrideRemoval&) = default;
};

/// Everything stored under one name, read atomically.
///
/// A key's state follows the change that last set ITS policy, with that change's version and
/// time: its override if it has one; else the removal of its override, if that came after the
/// name's policy was stored (as_is); else the name's policy (with its carry). A change of one
/// key's override leaves every other key's version as it was.
struct StoredPolicies {
  /// The name's version, that of its latest change of any kind: 0 when nothing was ever stored.
  std::int64_t version = 0;
  /// The name's policy, if one is stored.
  std::optional<PolicyRecord> policy;
  /// Per key, the policy that replaces the name's for that key (a tier); its carry is as_is.
  std::map<std::string, PolicyRecord> overrides;
  /// Per key without an override, the removal of its override made after the name's policy was
  /// stored (storing the policy again forgets them all).
  std::map<std::string, OverrideRemoval> removed_overrides;
};

/// Policies stored in Redis, one per limiter name, shared by the whole fleet (Redisson's
/// RRateLimiter keeps its rate the same way). A Limiter made without a policy
/// (`Limiter(client, options)`) follows the one stored under its name: a change reaches it
/// within a round trip of the change's notice while Redis is reachable, and within
/// LimiterOptions::policy_refresh otherwise.
///
/// The record is `<prefix>:policy:{<name>}` (a hash: version, policy text, since, carry), the
/// overrides `<prefix>:policy:{<name>}:overrides` and the removals of overrides since the policy
/// was stored `<prefix>:policy:{<name>}:removed`, with the name escaped as in a limiter's keys.
/// Each write is one script: it bumps the name's version (which only grows, also across
/// remove()), stores, and publishes the version on `<prefix>:policy:{<name>}:changed`. These
/// configuration keys have no TTL: they live until remove(). Use on the client's loop thread.
/// Policies are validated before anything is sent (InvalidArgument).
class PolicyStore {
 public:
  /// A store whose keys start with `prefix` (that of the limiters that follow it).
  explicit PolicyStore(Client& client, std::string prefix = "rl");

  /// Stores `policy` under `name` only if no policy is stored there: true if this call stored
  /// it. Atomic: of processes racing, exactly one gets true. A policy of another Policy::scope
  /// than the name's overrides is an InvalidArgument.
  Task<bool> try_set(std::string name, Policy policy);
  /// Stores `policy` under `name`, replacing any; keys' state carries over as `carry` says. A
  /// change of Policy::scope starts every key afresh: InvalidArgument, storing nothing, unless
  /// `carry` is Carry::reset and no override of the other scope remains (a key returned from
  /// one would start afresh too).
  Task<void> set(std::string name, Policy policy, Carry carry = Carry::as_is);
  /// The policy stored under `name`, if any.
  Task<std::optional<Policy>> get(std::string name);
  /// The policy stored under `name` with its version, time of change and carry, if any.
  Task<std::optional<PolicyRecord>> record(std::string name);
  /// The name's policy and overrides, read at once.
  Task<StoredPolicies> read(std::string name);
  /// Makes `key` of `name` follow `policy` instead of the name's policy (a tier per key). An
  /// override of another Policy::scope than the name's policy, or than its other overrides, is
  /// an InvalidArgument.
  Task<void> set_override(std::string name, std::string key, Policy policy);
  /// Returns `key` to the name's policy: its state carries over as_is from the removal's time.
  Task<void> remove_override(std::string name, std::string key);
  /// Removes the name's policy and overrides; followers then fail with PolicyNotFound. The
  /// version is kept, so a later policy gets a larger one.
  Task<void> remove(std::string name);

 private:
  Client* client_;
  std::string prefix_;
};

}  // namespace redlimit
