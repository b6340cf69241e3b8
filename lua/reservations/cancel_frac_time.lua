-- Cancels on a key that stores a time (GCRA's TAT, the leaky bucket's next departure): the
-- cancel section of algorithms/gcra.lua and algorithms/leaky_bucket.lua (statements; the
-- functions it calls are in reservations/cancel.lua). The key, carried over to the limit in
-- force (p, d, burst), moves back by n*T in its terms, but not before now; the waiters behind
-- move by the shorter of that and the reservation's own step (waiters_shift); the backlog ended
-- at the time before the move.
--!include ../lib/load_frac_time.lua
if not stale then
  verdict = cancel_verdict(log, version, cancels, epoch, now, reserved_p, slot, slot_f, cancelled,
                           reserved_epoch, cancels_before)
end
if verdict == 'returned' then
  shift, shift_f, shift_p = waiters_shift(n, d, p, reserved_d, reserved_p)
  local back, back_f = scaled(n, d, p)
  local new, new_f = sub_frac(stored_time, stored_f, back, back_f, p)
  if not after_frac(new, new_f, now, 0) then new, new_f = now, 0 end
  cancels = cancels + 1
  log_cancel(log, now, cancels, cancelled, shift, shift_f, shift_p,
             ceil_us(stored_time, stored_f))
  reset = ceil_us(new - now, new_f)
  if reset < 1 then reset = 1 end
  stored_time, stored_f = new, new_f  -- what the write section writes when taking nothing
  --!use write
end
