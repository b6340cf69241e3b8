-- The arguments of every lean decide script (lua/shapes/lean.lua), checked before the first
-- write. Included as statements, not as a function: a lean script defines none, because
-- EVALSHA would create it again on every call. The including script first names itself and
-- its limit's three fields, e.g.
--   local lean_script, lean_fields = 'decide_gcra', 'p >= 1, d >= 1, burst >= 0'
--
-- KEYS[1]     the state key
-- ARGV[1]     permits requested
-- ARGV[2]     now in microseconds, for tests only, or '' to use the server's TIME (with an
--             injected time, the key lives an hour longer, as in lua/shapes/general.lua)
-- ARGV[3]     the request's policy version pv (>= 0)
-- ARGV[4]     since: when the policy took effect, in microseconds (0: unknown, now)
-- ARGV[5]     carry: 0 as_is, 1 proportional, 2 reset
-- ARGV[6..8]  the limit's three integer fields, as lua/shapes/general.lua takes them: the first
--             two >= 1, the third >= 0
--
-- Leaves MAX_EXACT, floor, n (the permits), field1, field2, field3, now, TTL_EXTRA_MS, pv,
-- since (resolved: now when 0 or later than now), sent_since (since as sent) and carry.

--!include numbers.lua

local n, field1, field2, field3 =
    tonumber(ARGV[1]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local pv, since, carry = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if #KEYS ~= 1 or #ARGV ~= 8 or
    not (n and field1 and field2 and field3 and pv and since and carry and
         pv == floor(pv) and pv >= 0 and pv <= MAX_EXACT and since == floor(since) and
         since >= 0 and since <= MAX_EXACT and (carry == 0 or carry == 1 or carry == 2) and
         n == floor(n) and field1 == floor(field1) and
         field2 == floor(field2) and field3 == floor(field3) and n >= 1 and n <= MAX_EXACT and
         field1 >= 1 and field1 <= MAX_EXACT and field2 >= 1 and field2 <= MAX_EXACT and
         field3 >= 0 and field3 <= MAX_EXACT) then
  error('redlimit: ' .. lean_script .. ' expects 1 key and 8 integer arguments (permits >= 1, ' ..
        'now or \'\', pv >= 0, since >= 0, carry 0-2, ' .. lean_fields ..
        ', all at most 2^52), got ' .. tostring(#KEYS) .. ' keys and ' .. table.concat(ARGV, ' '))
end
local now
local TTL_EXTRA_MS = 0
if ARGV[2] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[2])
  if not now or now ~= floor(now) or now < 0 or now > MAX_EXACT then
    error('redlimit: argument now must be an integer in [0, 2^52], got ' .. tostring(ARGV[2]))
  end
  TTL_EXTRA_MS = 3600000
end
local sent_since = since
if since == 0 or since > now then since = now end
