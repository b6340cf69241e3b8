-- Versions and cancellation. Each reservation and each cancellation on a key increments the
-- key's version: a reservation's version is its place in the queue, and a cancellation's
-- version orders it against every reservation (a waiter moves only for cancellations that came
-- after its own reservation, of a reservation ahead of it).
--
-- Cancelling a reservation on a key that stores a time (GCRA's TAT, the leaky bucket's next
-- departure): only one whose slot is still in the future gives anything back. The stored time
-- moves back by n*T, and every reservation behind it may move n*T earlier. Why that is safe: a
-- cancellable reservation waited, so every reservation made after it while it was pending found
-- a backlog longer than tau >= n*T ahead of its own arrival; moving it n*T earlier never moves
-- it before the moment it would have had without the cancelled one.
-- Model: src/algorithms/reservations.cpp.
--
-- Returns the shift (us, f) and the cancellation's version, or nothing when the slot is due.
local function cancel_frac_time(key, now, n, p, d, burst, slot, slot_f)
  if not after_frac(slot, slot_f, now, 0) then return end
  local time, time_f, version = load_frac_time(key, now, p)
  local shift, shift_f = scaled(n, d, p)
  local back, back_f = sub_frac(time, time_f, shift, shift_f, p)
  if not after_frac(back, back_f, now, 0) then back, back_f = now, 0 end
  version = version + 1
  -- The version orders late messages; it is kept at least 1 ms after the backlog is gone.
  local ttl = ceil_us(back - now, back_f)
  if ttl < 1 then ttl = 1 end
  store(key, frac_time_value(back, back_f, p, version), ttl)
  return shift, shift_f, version
end
