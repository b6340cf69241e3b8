-- The stored value `value` of the time (new, new_f) under p, with the reservation bookkeeping
-- version, cancels, epoch (statements; see lib/frac_time.lua for the format).
-- Why strings: Redis 7.0 converts a number argument of redis.call with printf's %.17g, which
-- costs more than Lua's integer formatting (%d, exact below 2^53).
local value
if version > 0 then
  value = string.format('%d:%d:%d:%d:%d:%d', new, new_f, p, version, cancels, epoch)
elseif new_f > 0 then
  value = string.format('%d:%d:%d', new, new_f, p)
else
  value = string.format('%d', new)
end
