-- policy_store: the policy stored under one limiter name, and its per-key overrides
-- (PolicyStore, src/policy/policy_store.cpp). Every write is this one script: it checks, bumps
-- the name's version, stores, and publishes the new version on KEYS[1] .. ':changed', so that
-- every following limiter reads the record again. Configuration keys have no TTL: they live
-- until remove() (which keeps the version as a tombstone, so that a version never repeats).
--
-- KEYS[1]  the name's record, a hash: version (only grows), policy (text form), since (Redis
--          TIME of the policy's change, microseconds), carry (0 as_is, 1 proportional, 2 reset),
--          policy_version (the version that stored the policy), overrides (how many are stored)
--          and override_scope (theirs while there are any: 1 per_client, 0 overall)
-- KEYS[2]  the name's overrides, a hash: key -> "<version>:<since>:<policy text>"
-- KEYS[3]  the overrides removed since the policy was last stored, a hash: key ->
--          "<version>:<since>" of the removal (the key follows the policy from then on, so its
--          state converts at that time); cleared for a key by set_override, entirely when the
--          policy is stored (its version is then larger) and by remove
-- ARGV[1]  'read', 'try_set', 'set', 'remove', 'set_override', 'remove_override' or 'advance'
-- ARGV[2]  try_set, set, set_override: the policy's text form (validated by the client);
--          advance: the version a key's state was written under (the floor)
-- ARGV[3]  set: the carry (0, 1 or 2); set_override, remove_override, advance: the key
--
-- read returns {record fields and values, override keys and values, removed keys and values}
-- (HGETALL of each); the writes return {done (0/1), version, since}: try_set is not done when a
-- policy is stored, remove_override when the key has no override, advance when the key's
-- version is at least the floor; try_set, set and set_override return {-1, version, 0} and
-- store nothing when the policy would change the scope of the name's policies (the stored
-- policy's and its overrides', which is one): a set whose carry is reset may change the stored
-- policy's, unless overrides of the other scope remain.
--
-- advance: a follower found a key's state written under a version above the key's version
-- here, so the store lost changes (a restart without persistence, a failover to a replica that
-- had not received them). Every record of the name moves to one new version, above the floor
-- and the name's version, keeping its policy, its since and its carry (a reset becomes as_is:
-- it was applied to the keys it reached, and applying it again would free their permits); the
-- keys then follow their policies again, their states converted as for any new version of the
-- same parameters (kept exactly).

local record, overrides, removed = KEYS[1], KEYS[2], KEYS[3]
local op = ARGV[1]

if op == 'read' then
  return {redis.call('HGETALL', record), redis.call('HGETALL', overrides),
          redis.call('HGETALL', removed)}
end

local time = redis.call('TIME')
local since = string.format('%d', tonumber(time[1]) * 1000000 + tonumber(time[2]))

local function current_version()
  return tonumber(redis.call('HGET', record, 'version') or '0')
end

-- Bumps the version, publishes it, and returns the write's reply.
local function changed()
  local version = redis.call('HINCRBY', record, 'version', 1)
  redis.call('PUBLISH', record .. ':changed', string.format('%d', version))
  return {1, version, since}
end

-- Whether a policy's text form has a per_client scope: to_string() writes it last.
local function per_client(text)
  return string.sub(text, -18) == '; scope per_client'
end

-- Whether `text` would change the scope of the stored policy, and whether that of the
-- overrides: every key would start afresh under it (the other scope's keys are other keys), so
-- only a reset makes the first change, and nothing the second (a key returned from an override
-- of the other scope would start afresh too).
local function scope_changes(text)
  local scope = per_client(text) and '1' or '0'
  local stored = redis.call('HGET', record, 'policy')
  local of_overrides = redis.call('HGET', record, 'override_scope')
  local policy_changes = stored and (per_client(stored) and '1' or '0') ~= scope
  return policy_changes or false, (of_overrides and of_overrides ~= scope) or false
end

local function store(text, carry)
  if carry ~= '0' and carry ~= '1' and carry ~= '2' then
    error('redlimit: carry must be 0, 1 or 2, got ' .. tostring(carry))
  end
  local of_policy, of_overrides = scope_changes(text)
  if (carry ~= '2' and of_policy) or of_overrides then return {-1, current_version(), 0} end
  local reply = changed()
  redis.call('DEL', removed)
  redis.call('HSET', record, 'policy', text, 'since', since, 'carry', carry, 'policy_version',
             string.format('%d', reply[2]))
  return reply
end

if op == 'try_set' then
  if redis.call('HEXISTS', record, 'policy') == 1 then return {0, current_version(), 0} end
  return store(ARGV[2], '0')
elseif op == 'set' then
  return store(ARGV[2], ARGV[3])
elseif op == 'remove' then
  redis.call('HDEL', record, 'policy', 'since', 'carry', 'policy_version', 'overrides',
             'override_scope')
  redis.call('DEL', overrides, removed)
  return changed()
elseif op == 'set_override' then
  local of_policy, of_overrides = scope_changes(ARGV[2])
  if of_policy or of_overrides then return {-1, current_version(), 0} end
  local reply = changed()
  redis.call('HDEL', removed, ARGV[3])
  if redis.call('HSET', overrides, ARGV[3],
                string.format('%d', reply[2]) .. ':' .. since .. ':' .. ARGV[2]) == 1 then
    redis.call('HINCRBY', record, 'overrides', 1)
  end
  redis.call('HSET', record, 'override_scope', per_client(ARGV[2]) and '1' or '0')
  return reply
elseif op == 'advance' then
  local floor = tonumber(ARGV[2])
  if not floor or floor ~= math.floor(floor) or floor < 1 or floor > 9007199254740992 then
    error('redlimit: advance needs a version floor from 1 to 2^53, got ' .. tostring(ARGV[2]))
  end
  local key = ARGV[3]
  local held = redis.call('HGET', overrides, key) or redis.call('HGET', removed, key)
  local key_version
  if held then
    key_version = tonumber(string.match(held, '^(%d+):'))
  else
    key_version = tonumber(redis.call('HGET', record, 'policy_version') or '0')
  end
  if key_version >= floor then return {0, current_version(), 0} end
  if current_version() < floor then
    redis.call('HSET', record, 'version', string.format('%d', floor))
  end
  local reply = changed()
  local version = string.format('%d', reply[2])
  -- Why HGET, not HEXISTS: a follower runs this, and its ACL rules have no HEXISTS.
  if redis.call('HGET', record, 'policy') then
    redis.call('HSET', record, 'policy_version', version)
    if redis.call('HGET', record, 'carry') == '2' then redis.call('HSET', record, 'carry', '0') end
  end
  for _, hash in ipairs({overrides, removed}) do
    local entries = redis.call('HGETALL', hash)
    for i = 1, #entries, 2 do
      redis.call('HSET', hash, entries[i], version .. string.match(entries[i + 1], '^%d+(:.*)$'))
    end
  end
  return reply
elseif op == 'remove_override' then
  if redis.call('HDEL', overrides, ARGV[3]) == 0 then return {0, current_version(), 0} end
  if redis.call('HINCRBY', record, 'overrides', -1) <= 0 then
    redis.call('HDEL', record, 'overrides', 'override_scope')
  end
  local reply = changed()
  redis.call('HSET', removed, ARGV[3], string.format('%d', reply[2]) .. ':' .. since)
  return reply
end
error('redlimit: operation must be read, try_set, set, remove, set_override, remove_override or ' ..
      'advance, got ' .. tostring(op))
