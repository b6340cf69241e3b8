-- Cancels on a key that stores a time (GCRA's TAT, the leaky bucket's next departure): the
-- cancel section of algorithms/gcra.lua and algorithms/leaky_bucket.lua (statements; the
-- functions it calls are in reservations/cancel.lua). The time moves back by the n*T the
-- reservation took, but not before now; the backlog ended at the time before the move.
--!include ../lib/load_frac_time.lua
verdict = cancel_verdict(log, version, cancels, epoch, now, p, slot, slot_f, cancelled,
                         reserved_epoch, cancels_before)
if verdict == 'returned' then
  shift, shift_f = scaled(n, d, p)
  local new, new_f = sub_frac(stored_time, stored_f, shift, shift_f, p)
  if not after_frac(new, new_f, now, 0) then new, new_f = now, 0 end
  cancels = cancels + 1
  log_cancel(log, now, cancels, cancelled, shift, shift_f, p, ceil_us(stored_time, stored_f))
  reset = ceil_us(new - now, new_f)
  if reset < 1 then reset = 1 end
  --!use write
end
