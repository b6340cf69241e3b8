-- decide: evaluates every limit of a policy for one request, atomically, all or nothing.
--
-- KEYS[i]   the state key of limit i (all keys share one hash tag)
-- ARGV[1]   'acquire' (write when every limit allows) or 'peek' (never write)
-- ARGV[2]   permits requested
-- ARGV[3]   now in microseconds for tests, or '' to use the server's TIME
-- ARGV[4..] per limit, 4 fields: algorithm, then its three integer parameters
--           gcra: permits p and period d (reduced to lowest terms) and burst
--
-- An algorithm is a function (key, now, permits, a, b, c) returning allowed, limit, remaining,
-- retry_after_us, reset_after_us and, when allowed, the value to store and its TTL in ms.
--
-- Returns {allowed (0/1), now_us, binding (0-based), limit, remaining, retry_after_us,
-- reset_after_us}: a denied decision is bound by the limit with the longest retry_after, an
-- allowed one by the limit with the fewest permits remaining.

local ALGORITHMS = {}
--!include lib/exact.lua
--!include algorithms/gcra.lua

local FIELDS = 4
local op = ARGV[1]
if op ~= 'acquire' and op ~= 'peek' then
  error('redlimit: operation must be acquire or peek, got ' .. tostring(op))
end
local permits = integer_arg(ARGV[2], 'permits', 1, MAX_EXACT)
local now
if ARGV[3] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = integer_arg(ARGV[3], 'now', 0, MAX_EXACT)
end
if #ARGV ~= 3 + FIELDS * #KEYS or #KEYS == 0 then
  error('redlimit: expected ' .. FIELDS .. ' arguments per key')
end

-- Phase 1: decide every limit without writing.
local decisions = {}
local all_allowed = true
for i = 1, #KEYS do
  local base = 3 + (i - 1) * FIELDS
  local algorithm = ALGORITHMS[ARGV[base + 1]]
  if algorithm == nil then error('redlimit: unknown algorithm ' .. tostring(ARGV[base + 1])) end
  local a = integer_arg(ARGV[base + 2], 'parameter 1', 1, MAX_EXACT)
  local b = integer_arg(ARGV[base + 3], 'parameter 2', 1, MAX_EXACT)
  local c = integer_arg(ARGV[base + 4], 'parameter 3', 0, MAX_EXACT)
  local decision = {algorithm(KEYS[i], now, permits, a, b, c)}
  decisions[i] = decision
  if not decision[1] then all_allowed = false end
end

-- Phase 2: write only when every limit allows.
if all_allowed and op == 'acquire' then
  for i = 1, #KEYS do
    local d = decisions[i]
    redis.call('SET', KEYS[i], d[6], 'PX', d[7])
  end
end

local binding = 1
for i = 2, #KEYS do
  local d, best = decisions[i], decisions[binding]
  if all_allowed then
    if d[3] < best[3] then binding = i end
  elseif not d[1] and (best[1] or d[4] > best[4]) then
    binding = i
  end
end
local chosen = decisions[binding]
local allowed = 0
if all_allowed then allowed = 1 end
return {allowed, now, binding - 1, chosen[2], chosen[3], chosen[4], chosen[5]}
