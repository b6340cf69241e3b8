-- GCRA (generic cell rate algorithm): one key holds the theoretical arrival time (TAT), the
-- time at which the limit would be idle again. Emission interval T = d/p us (the rate reduced to
-- lowest terms), capacity tau = burst * T. A request for n permits passes when
-- max(TAT, now) + n*T <= now + tau. The TAT is stored as lib/frac_time.lua describes. Time needs
-- no separate last-seen value: now only enters through max(TAT, now).
-- When the Redis clock steps back: the value records the time it was written; one written
-- later than now is a clock step, and its TAT moves back by the step (lib/load_frac_time.lua):
-- the backlog of the write is kept, measured from it (a reservation's slot may legitimately be
-- years ahead, up to 2^52 us, the year 2112), nothing is freed, and it is written back, also
-- when denied, so the key is locked for at most tau plus that backlog, not the whole step. A
-- value of an earlier release (no write time) keeps the horizon rule: a TAT later than now +
-- tau (on a key acquire() reserved on: 2^52 + tau) is taken as now + tau.
-- Model: src/algorithms/gcra.cpp.
--!params p, d, burst
--!checks p >= 1, d >= 1, burst >= 0

--!part schedule
local departures = false  -- the stored time is a TAT (lib/load_frac_time.lua)
--!include ../lib/load_frac_time.lua
local tat, tat_f = stored_time, stored_f
-- n*T and tau = burst*T as (whole us, fraction in 1/p us).
local step, step_f, cap, cap_f = n * d, 0, burst * d, 0
if p > 1 then
  local q = IDIV(step, p)
  step, step_f = q, step - q * p
  q = IDIV(cap, p)
  cap, cap_f = q, cap - q * p
end
local new, new_f = tat + step, tat_f + step_f
if new_f >= p then new, new_f = new + 1, new_f - p end
local latest = now + cap  -- the latest TAT the limit allows: now + tau, fraction cap_f

--!part outcome
capacity = burst
-- Permits left after this decision: floor(room / d), room in 1/p us.
local room
if allowed then room = (latest - new) * p + cap_f - new_f else
  room = (latest - tat) * p + cap_f - tat_f
end
if room > 0 then
  remaining = IDIV(room, d)
end
if allowed then
  reset = new - now
  if new_f > 0 then reset = reset + 1 end
else
  -- Denied: the request passes once now' + tau >= new, i.e. after new - tau - now.
  local wait, wait_f = new - latest, new_f - cap_f
  if wait_f < 0 then wait, wait_f = wait - 1, wait_f + p end
  if wait_f > 0 then wait = wait + 1 end
  retry = wait
  reset = tat - now
  if tat_f > 0 then reset = reset + 1 end
end

--!section decide
--!use schedule
allowed = new < latest or (new == latest and new_f <= cap_f)
--!use outcome

--!section idle
reset = tat - now
if tat_f > 0 then reset = reset + 1 end

--!section write
--!include ../lib/write_frac_time.lua

--!section reserve
-- The permits are scheduled at the earliest slot where they conform,
-- slot = max(now, max(TAT, now) + n*T - tau), and the TAT moves on as if they had arrived; the
-- caller sleeps until the slot. A denied reservation's retry is its wait (new - tau - now).
-- With not_before (acquire_all: a later slot that every claim's key can give), the permits
-- arrive then: the TAT moves on from max(TAT, not_before).
--!use schedule
if not_before > tat then new, new_f = not_before + step, step_f end
slot, slot_f = new - cap, new_f - cap_f
if slot_f < 0 then slot, slot_f = slot - 1, slot_f + p end
if slot < now then slot, slot_f = now, 0 end
if slot < not_before then slot, slot_f = not_before, 0 end
wait = slot - now
if slot_f > 0 then wait = wait + 1 end
allowed = wait <= max_wait
--!use outcome

--!section cancel
local departures = false  -- the stored time is a TAT (lib/load_frac_time.lua)
--!include ../reservations/cancel_frac_time.lua

--!section adjust
-- refund: the TAT moves back by n*T, never before now (the limit full); give_back: by what the
-- take at taken_at may still hold, n*T less the time since (never more than exact), and not at
-- all while a slot is ahead (a reservation made since keeps it); penalize: on by n*T,
-- beyond now + tau as a debt (the write time keeps it: lib/load_frac_time.lua), at most to
-- 2^52 us; block: to at least until + tau - T, so that a first permit passes at until and none
-- before.
--!use schedule
local to, to_f = tat, tat_f
if op == 'refund' or op == 'give_back' then
  -- A slot ahead of now (TAT - tau > now): a reservation made after the take.
  local scheduled_after = tat - cap > now or (tat - cap == now and tat_f > cap_f)
  --!include ../lib/time_back.lua
elseif op == 'penalize' then
  to, to_f = new, new_f
  if to >= MAX_EXACT then to, to_f = MAX_EXACT, 0 end
else
  local span = (burst - 1) * d
  local q = IDIV(span, p)
  local from, from_f = until_us + q, span - q * p
  if from > to or (from == to and from_f > to_f) then to, to_f = from, from_f end
end
apply = function()
  local taken = 0
  stored_time, stored_f = to, to_f
  --!use write
end
