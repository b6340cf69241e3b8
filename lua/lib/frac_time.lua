-- Times with a fraction of a microsecond, (us, f) meaning us + f/p, as functions for
-- lua/reserve.lua's cancellations. Needs exact.lua. C++ twin: src/algorithms/exact.hpp, gcra.cpp.
--
-- The stored state of the GCRA and leaky bucket keys (read by load_frac_time.lua, written by
-- frac_time_value.lua): "us:f:p:version:cancels:epoch:d:burst:pv:written", the time in whole
-- microseconds with its fraction f/p, the reservation bookkeeping (0:0:0 until acquire()
-- reserved on the key, see reservations/cancel.lua), the stamp: the parameters p, d, burst and
-- the policy version pv it was written under (for a limiter that follows no store, pv 0, the
-- reset tag: lib/stamp_rule.lua), and the script's now when it wrote (a clock step back is told
-- by it, see load_frac_time.lua). Earlier releases wrote the same without `written` (read with
-- the horizon rule), or "us", "us:f:p" or "us:f:p:version:cancels:epoch" (no stamp; read as
-- before, rewritten on the next write).

-- a - b; may be negative in whole microseconds (the fraction stays in [0, p)).
local function sub_frac(a, af, b, bf, p)
  local us, f = a - b, af - bf
  if f < 0 then return us - 1, f + p end
  return us, f
end

-- True if (a, af) > (b, bf).
local function after_frac(a, af, b, bf)
  return a > b or (a == b and af > bf)
end
