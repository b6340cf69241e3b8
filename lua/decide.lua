-- decide: evaluates every limit of a policy for one request, atomically, all or nothing.
-- Model: src/algorithms/policy_model.cpp.
--
-- KEYS[i]   the state key of limit i (all keys share one hash tag)
-- ARGV[1]   'acquire' (write when every limit allows) or 'peek' (never write; remaining is
--           then the permits available now rather than after this request)
-- ARGV[2]   permits requested
-- ARGV[3]   now in microseconds, for tests only, or '' to use the server's TIME. With an
--           injected time, keys live an hour longer than their state matters, because Redis
--           expires them on its own clock, not on the injected one.
-- ARGV[4..] per limit, 4 fields: algorithm, then its three integer parameters
--           gcra, token_bucket, leaky_bucket: p and d (the rate in lowest terms), burst
--           fixed_window: limit, period, anchored (0 or 1)
--           sliding_window_log, sliding_window_counter: limit, period, 0
--
-- An algorithm is a function (key, now, permits, a, b, c) returning allowed, limit, remaining,
-- retry_after_us, reset_after_us, the time it used and, when allowed, a function that writes
-- its new state. Each algorithm only reads while deciding; writes happen only once every limit
-- has allowed, so a denied request changes nothing.
--
-- Returns {allowed (0/1), now_us, binding (0-based), limit, remaining, retry_after_us,
-- reset_after_us}: a denied decision is bound by the limit with the longest retry_after, an
-- allowed one by the limit with the fewest permits remaining; now_us is the latest time any
-- limit used.

local ALGORITHMS = {}
local TTL_EXTRA_MS = 0
--!include lib/exact.lua
--!include lib/frac_time.lua
--!include lib/tokens.lua
--!include algorithms/gcra.lua
--!include algorithms/leaky_bucket.lua
--!include algorithms/token_bucket.lua
--!include algorithms/fixed_window.lua
--!include algorithms/sliding_window_log.lua
--!include algorithms/sliding_window_counter.lua

local FIELDS = 4
local op = ARGV[1]
if op ~= 'acquire' and op ~= 'peek' then
  error('redlimit: operation must be acquire or peek, got ' .. tostring(op))
end
if #KEYS == 0 or #ARGV ~= 3 + FIELDS * #KEYS then
  error('redlimit: expected ' .. FIELDS .. ' arguments per key')
end
local permits = integer_arg(ARGV[2], 'permits', 1, MAX_EXACT)
local now
if ARGV[3] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = integer_arg(ARGV[3], 'now', 0, MAX_EXACT)
  TTL_EXTRA_MS = 3600000
end

-- Phase 1: decide every limit without writing.
local decisions = {}
local all_allowed = true
local used_now = 0
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
  if decision[6] > used_now then used_now = decision[6] end
end

-- Phase 2: write only when every limit allows. A peek reports the permits available now.
if op == 'acquire' then
  if all_allowed then
    for i = 1, #KEYS do decisions[i][7]() end
  end
else
  for i = 1, #KEYS do
    if decisions[i][1] then decisions[i][3] = decisions[i][3] + permits end
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
return {allowed, used_now, binding - 1, chosen[2], chosen[3], chosen[4], chosen[5]}
