-- The stored value `value` of the time (new, new_f) under p, with the reservation bookkeeping
-- version, cancels, epoch, the stamp d, burst, stamp_pv (lib/stamp_rule.lua) and the time of
-- the write, now (statements; see lib/frac_time.lua for the format).
-- Why strings: Redis 7.0 converts a number argument of redis.call with printf's %.17g, which
-- costs more than Lua's integer formatting (%d, exact below 2^53).
local value = string.format('%d:%d:%d:%d:%d:%d:%d:%d:%d:%d', new, new_f, p, version, cancels,
                            epoch, d, burst, stamp_pv, now)
if MEMO then MEMO[value] = {new, new_f, p, version, cancels, epoch, d, burst, stamp_pv, now} end
