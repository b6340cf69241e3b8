-- The write section of the keys that store a time (algorithms/gcra.lua, leaky_bucket.lua;
-- statements): writes (new, new_f) when taking permits, else the state as loaded (stored_time,
-- stored_f: carried over to this policy; a cancel sets it to the time moved back); the key lives
-- until that time (at least 1 ms), and a key reserved on a little longer (reserved_grace.lua).
if taken == 0 then new, new_f = stored_time, stored_f end
--!include frac_time_value.lua
local until_idle = new - now
if new_f > 0 then until_idle = until_idle + 1 end
local ms = CEIL_DIV(until_idle, 1000)  -- the TTL in whole milliseconds, rounded up
if ms < 1 then ms = 1 end
--!include reserved_grace.lua
redis.call('SET', key, value, 'PX', string.format('%d', ms + TTL_EXTRA_MS))
