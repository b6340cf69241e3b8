-- Leaky bucket, a shaper: departures are spaced exactly T = d/p us apart; at most `burst`
-- permits may be queued. The key holds the time the next departure may leave, stored as GCRA
-- stores its TAT (lib/frac_time.lua). A request is admitted only when it can leave now; it then
-- occupies the next n*T.
-- When its policy changes (lib/load_frac_time.lua): carried as is, the permits queued at the
-- change's since stay queued (also beyond a smaller queue size: they drain first) and depart at
-- the new rate from since, so a change of the queue size alone never moves the next departure;
-- carried proportionally, the queue's fill is scaled to the new size; reset empties it.
-- When the Redis clock steps back: a value written later than now (its write time) has its
-- departure moved back by the step, the queue of the write kept (lib/load_frac_time.lua). In a
-- value of an earlier release, the queue never reaches beyond now + burst*T (a reservation is
-- admitted only if it fits), so a later stored departure is a clock step, taken as
-- now + burst*T (the queue full: nothing freed). Either is written back, also when denied, so
-- the key is locked for at most burst*T, not the whole step.
-- Model: src/algorithms/leaky_bucket.cpp.
--!params p, d, burst
--!checks p >= 1, d >= 1, burst >= 0
--!needs ../lib/muldiv.lua

--!part load
local departures = true  -- the stored time is the next departure (lib/load_frac_time.lua)
--!include ../lib/load_frac_time.lua
local free, free_f = stored_time, stored_f

--!part step
-- n*T = n*d/p us as (whole us, fraction in 1/p us).
local step, step_f = n * d, 0
if p > 1 then
  local q = IDIV(step, p)
  step, step_f = q, step - q * p
end

--!part queued
-- Permits queued in the time ahead (ahead, ahead_f): ceil(ahead / T), at most burst. Why the
-- test first: a debt (penalize, block) may lie far beyond burst*T, where ahead * p is inexact.
local queued = burst
local reach = IDIV(burst * d, p)
if ahead <= reach then
  queued = CEIL_DIV(ahead * p + ahead_f, d)
end
remaining = burst - queued
if remaining < 0 then remaining = 0 end

--!section decide
--!use load
allowed = free == now and free_f == 0
capacity = burst
local new, new_f
if allowed then
  -- It leaves now and occupies the next n*T.
  --!use step
  new, new_f = now + step, step_f
  remaining = burst - n
  reset = step
  if step_f > 0 then reset = reset + 1 end
else
  local ahead, ahead_f = free - now, free_f
  --!use queued
  retry = ahead
  if ahead_f > 0 then retry = retry + 1 end
  reset = retry
end

--!section idle
if allowed then reset = 0 end

--!section write
--!include ../lib/write_frac_time.lua

--!section reserve
-- The permits take the next departure slot and the n*T after it, if the queue then holds at
-- most `burst` permits (new <= now + burst*T) and the wait is within max_wait. With not_before
-- (acquire_all: a later slot that every claim's key can give), they arrive then: they depart
-- at max(free, not_before), and the queue is counted from not_before.
--!use load
--!use step
local arrival = now
if not_before > free then free, free_f = not_before, 0 end
if not_before > now then arrival = not_before end
local new, new_f = free + step, free_f + step_f
if new_f >= p then new, new_f = new + 1, new_f - p end
slot, slot_f = free, free_f
wait = free - now
if free_f > 0 then wait = wait + 1 end
local cap = IDIV(burst * d, p)  -- burst*T: whole us, fraction cap_f in 1/p us
local cap_f = burst * d - cap * p
allowed = wait <= max_wait and
              (new - arrival < cap or (new - arrival == cap and new_f <= cap_f))
capacity = burst
-- The queue ahead of now: with the permits when they are admitted, else as it is.
local ahead, ahead_f = free - now, free_f
if allowed then
  ahead, ahead_f = new - now, new_f
  reset = ahead
  if ahead_f > 0 then reset = reset + 1 end
else
  retry, reset = wait, wait
end
--!use queued

--!section cancel
local departures = true  -- the stored time is the next departure (lib/load_frac_time.lua)
--!include ../reservations/cancel_frac_time.lua

--!section adjust
-- refund: the next departure moves back by n*T, never before now (the queue empty); give_back:
-- by what the take at taken_at may still hold, n*T less the time since, and not at all when a
-- request queued after it (it keeps its departure); penalize:
-- on by n*T, beyond the queue's burst*T as a debt (the write time keeps it), at most to 2^52
-- us; block: to at least until, when a first permit may leave.
--!use load
--!use step
local to, to_f = free, free_f
if op == 'refund' or op == 'give_back' then
  -- The next departure later than the take's end: a request queued after the take.
  local scheduled_after = free > taken_at + step or (free == taken_at + step and free_f > step_f)
  --!include ../lib/time_back.lua
elseif op == 'penalize' then
  to, to_f = free + step, free_f + step_f
  if to_f >= p then to, to_f = to + 1, to_f - p end
  if to >= MAX_EXACT then to, to_f = MAX_EXACT, 0 end
elseif until_us > to then
  to, to_f = until_us, 0
end
apply = function()
  local taken = 0
  local new, new_f = to, to_f
  stored_time, stored_f = to, to_f
  --!use write
end
