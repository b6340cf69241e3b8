-- Reservations on a token bucket key: the bucket may go into debt; a request that leaves it at
-- -x (in 1/d tokens) is scheduled x/p microseconds later. Cancelling a pending reservation pays
-- its tokens back (see reservations/cancel.lua for why those behind may move n*T earlier).
-- Model: src/algorithms/reservations.cpp. Needs lib/tokens.lua.

local function token_bucket_reserve(key, now, n, p, d, burst, max_wait)
  local full = burst * d
  local level, t, book = load_tokens(key, now, p, d, full)
  local after = level - n * d
  local slot, slot_f = t, 0
  if after < 0 then
    local debt_us = idiv(-after, p)
    slot, slot_f = t + debt_us, -after - debt_us * p
  end
  local wait = ceil_us(slot - now, slot_f)
  local lag = t - now  -- after a clock step back, times count from now, not from t
  if wait > max_wait or -after > max_debt(full) then
    local remaining = 0
    if level > 0 then remaining = idiv(level, d) end
    return false, burst, remaining, wait, ceil_div(full - level, p) + lag, 0, 0, 0, book
  end
  local remaining = 0
  if after > 0 then remaining = idiv(after, d) end
  local reset = ceil_div(full - after, p) + lag
  book = reserved(book, now)
  local value = tokens_value(after, t, d, book)
  return true, burst, remaining, 0, reset, wait, slot, slot_f, book,
         function() store(key, value, reset) end
end

local function token_bucket_cancel(key, log, now, n, p, d, burst, slot, slot_f, version, epoch,
                                   before)
  local full = burst * d
  local level, t, book = load_tokens(key, now, p, d, full)
  local verdict = cancel_verdict(log, book, now, p, slot, slot_f, version, epoch, before)
  if verdict ~= 'returned' then return verdict end
  -- The backlog ends when the debt is paid.
  local backlog_end = t
  if level < 0 then backlog_end = t + ceil_div(-level, p) end
  level = level + n * d
  if level > full then level = full end
  book = {book[1], book[2] + 1, book[3]}
  local shift, shift_f = scaled(n, d, p)
  log_cancel(log, now, book, version, shift, shift_f, p, backlog_end)
  local reset = ceil_div(full - level, p) + t - now
  if reset < 1 then reset = 1 end
  store(key, tokens_value(level, t, d, book), reset)
  return verdict, shift, shift_f, book
end

RESERVATIONS['token_bucket'] = {token_bucket_reserve, token_bucket_cancel}
