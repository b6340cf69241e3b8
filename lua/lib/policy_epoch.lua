-- ARGV[4] (pv), ARGV[5] (since) and ARGV[6] (carry), as lua/shapes/general.lua and
-- lua/reserve.lua take them (statements; needs now). The lean shape reads the same three at
-- ARGV[3..5] (lib/lean_arguments.lua).
--
-- Leaves pv (the request's policy version), since (when the policy took effect, resolved: now
-- when unknown or later than now), sent_since (since as sent: lib/stamp_rule.lua's reset tag)
-- and carry (0 as_is, 1 proportional, 2 reset).
local pv = integer_arg(ARGV[4], 'policy version', 0, MAX_EXACT)
local since = integer_arg(ARGV[5], 'since', 0, MAX_EXACT)
local carry = integer_arg(ARGV[6], 'carry', 0, 2)
local sent_since = since
if since == 0 or since > now then since = now end
