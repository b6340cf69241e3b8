-- The stored value `value` of the level `written` at time t, with the reservation bookkeeping
-- and the stamp, its version field stamp_pv (statements; the format as lib/load_tokens.lua
-- describes).
local value = string.format('%d:%d:%d:%d:%d:%d:%d:%d:%d', written, t, d, version, cancels, epoch,
                            p, burst, stamp_pv)
if MEMO then MEMO[value] = {written, t, d, version, cancels, epoch, p, burst, stamp_pv} end
