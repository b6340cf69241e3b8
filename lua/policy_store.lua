-- policy_store: the policy stored under one limiter name, and its per-key overrides
-- (PolicyStore, src/policy/policy_store.cpp). Every write is this one script: it checks, bumps
-- the name's version, stores, and publishes the new version on KEYS[1] .. ':changed', so that
-- every following limiter reads the record again. Configuration keys have no TTL: they live
-- until remove() (which keeps the version as a tombstone, so that a version never repeats).
--
-- KEYS[1]  the name's record, a hash: version (only grows), policy (text form), since (Redis
--          TIME of the policy's change, microseconds), carry (0 as_is, 1 proportional, 2 reset),
--          policy_version (the version that stored the policy)
-- KEYS[2]  the name's overrides, a hash: key -> "<version>:<since>:<policy text>"
-- KEYS[3]  the overrides removed since the policy was last stored, a hash: key ->
--          "<version>:<since>" of the removal (the key follows the policy from then on, so its
--          state converts at that time); cleared for a key by set_override, entirely when the
--          policy is stored (its version is then larger) and by remove
-- ARGV[1]  'read', 'try_set', 'set', 'remove', 'set_override' or 'remove_override'
-- ARGV[2]  try_set, set, set_override: the policy's text form (validated by the client)
-- ARGV[3]  set: the carry (0, 1 or 2); set_override, remove_override: the key
--
-- read returns {record fields and values, override keys and values, removed keys and values}
-- (HGETALL of each); the writes return {done (0/1), version, since}: try_set is not done when a
-- policy is stored, remove_override when the key has no override.

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

local function store(text, carry)
  if carry ~= '0' and carry ~= '1' and carry ~= '2' then
    error('redlimit: carry must be 0, 1 or 2, got ' .. tostring(carry))
  end
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
  redis.call('HDEL', record, 'policy', 'since', 'carry', 'policy_version')
  redis.call('DEL', overrides, removed)
  return changed()
elseif op == 'set_override' then
  local reply = changed()
  redis.call('HDEL', removed, ARGV[3])
  redis.call('HSET', overrides, ARGV[3], string.format('%d', reply[2]) .. ':' .. since .. ':' .. ARGV[2])
  return reply
elseif op == 'remove_override' then
  if redis.call('HDEL', overrides, ARGV[3]) == 0 then return {0, current_version(), 0} end
  local reply = changed()
  redis.call('HSET', removed, ARGV[3], string.format('%d', reply[2]) .. ':' .. since)
  return reply
end
error('redlimit: operation must be read, try_set, set, remove, set_override or remove_override, got '
      .. tostring(op))
