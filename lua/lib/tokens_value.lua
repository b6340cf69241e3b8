-- The stored value `value` of the level `written` at time t, with the reservation bookkeeping
-- and the stamp (statements; the format as lib/load_tokens.lua describes).
local value = string.format('%d:%d:%d:%d:%d:%d:%d:%d:%d', written, t, d, version, cancels, epoch,
                            p, burst, pv)
if MEMO then MEMO[value] = {written, t, d, version, cancels, epoch, p, burst, pv} end
