-- The decision of a lean decide script (statements): the algorithm's sections for one request
-- and the reply, as shapes/lean.lua describes it. Included by shapes/lean.lua (a script per
-- request) and shapes/lean_run.lua (a function per request of a batch).
--
-- Needs key, n (the permits), now, TTL_EXTRA_MS, the policy epoch pv, since (resolved),
-- sent_since (as sent) and carry, the limit's three fields field1, field2, field3, MAX_EXACT and
-- floor, and the functions the algorithm names under --!needs. Returns the reply.
local @PARAMS@ = field1, field2, field3
local allowed, capacity, remaining, retry, reset, t = false, 0, 0, 0, 0, now
local rewrite, stale = false, nil
--!section decide
if stale then return string.format('stale %d', stale) end
if allowed or rewrite then
  local taken = 0
  if allowed then taken = n end
  --!section write
end
if allowed then return string.format('1 %d %d %d 0 %d', t, capacity, remaining, reset) end
return string.format('0 %d %d %d %d %d', t, capacity, remaining, retry, reset)
