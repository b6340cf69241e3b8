-- Reservations on a GCRA key (acquire): the permits are scheduled at the earliest slot where
-- they conform, slot = max(now, max(TAT, now) + n*T - tau), and the TAT moves on as if they
-- had arrived; the caller sleeps until the slot. Waiters are served in the order their
-- reservations reached Redis. Model: src/algorithms/reservations.cpp.
--
-- A reservation whose slot is still in the future can be cancelled (reservations/cancel.lua).

local function gcra_reserve(key, now, n, p, d, burst, max_wait)
  local tat, tat_f, book = load_frac_time(key, now, p)
  local step, step_f = scaled(n, d, p)
  local new, new_f = add_frac(tat, tat_f, step, step_f, p)
  local cap, cap_f = scaled(burst, d, p)
  local slot, slot_f = sub_frac(new, new_f, cap, cap_f, p)
  if slot < now then slot, slot_f = now, 0 end
  local wait = ceil_us(slot - now, slot_f)
  local left, left_f = new, new_f
  if wait > max_wait then left, left_f = tat, tat_f end
  local room = (now + cap - left) * p + cap_f - left_f
  local remaining = 0
  if room > 0 then remaining = idiv(room, d) end
  if wait > max_wait then
    return false, burst, remaining, wait, ceil_us(tat - now, tat_f), 0, 0, 0, book
  end
  local ttl = ceil_us(new - now, new_f)
  book = reserved(book, now)
  local value = frac_time_value(new, new_f, p, book)
  return true, burst, remaining, 0, ttl, wait, slot, slot_f, book,
         function() store(key, value, ttl) end
end

RESERVATIONS['gcra'] = {gcra_reserve, cancel_frac_time}
