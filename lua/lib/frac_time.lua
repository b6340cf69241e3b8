-- Times with a fraction of a microsecond, (us, f) meaning us + f/p, and the stored state of the
-- GCRA and leaky bucket keys, as functions for lua/reserve.lua. Needs exact.lua. C++ twin:
-- src/algorithms/exact.hpp, gcra.cpp.
--
-- Stored value: the time in whole microseconds (an integer, so Redis keeps it int-encoded), or
-- "us:f:p" when it has a fraction f/p of a microsecond, or "us:f:p:version:cancels:epoch" once
-- acquire() reserved on the key (see reservations/cancel.lua). A time stored under another
-- denominator is rounded up to a whole microsecond: that can only make it stricter.

local function add_frac(a, af, b, bf, p)
  local us, f = a + b, af + bf
  if f >= p then return us + 1, f - p end
  return us, f
end

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

-- The stored time of a key, or now if that is later, and its reservation bookkeeping (a
-- table {version, cancels, epoch}, see reservations/cancel.lua).
local function load_frac_time(key, now, p)
  --!include load_frac_time.lua
  return stored_time, stored_f, {version, cancels, epoch}
end

local function frac_time_value(new, new_f, p, book)
  local version, cancels, epoch = book[1], book[2], book[3]
  --!include frac_time_value.lua
  return value
end
