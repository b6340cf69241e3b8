-- Reservations on a leaky bucket key: the request takes the next departure slot and the n*T
-- after it, if the queue then holds at most `burst` permits. Model:
-- src/algorithms/reservations.cpp. Needs reservations/cancel.lua.

local function leaky_bucket_reserve(key, now, n, p, d, burst, max_wait)
  local free, free_f, book = load_frac_time(key, now, p)
  local step, step_f = scaled(n, d, p)
  local new, new_f = add_frac(free, free_f, step, step_f, p)
  local cap, cap_f = scaled(burst, d, p)
  local wait = ceil_us(free - now, free_f)
  if wait > max_wait or after_frac(new, new_f, now + cap, cap_f) then
    local remaining = 0
    if free - now <= cap then
      remaining = burst - ceil_div((free - now) * p + free_f, d)
      if remaining < 0 then remaining = 0 end
    end
    return false, burst, remaining, wait, wait, 0, 0, 0, book
  end
  local remaining = burst - ceil_div((new - now) * p + new_f, d)
  local ttl = ceil_us(new - now, new_f)
  book = reserved(book, now)
  local value = frac_time_value(new, new_f, p, book)
  return true, burst, remaining, 0, ttl, wait, free, free_f, book,
         function() store(key, value, ttl) end
end

RESERVATIONS['leaky_bucket'] = {leaky_bucket_reserve, cancel_frac_time}
