-- A leaky bucket's next departure (us, f in 1/den us, stamped with a step of sd/den us per
-- permit) carried as is to the rate in force, d/p us per permit, at since (statements, inside a
-- block of lib/load_frac_time.lua; needs muldiv, lib/muldiv.lua): the permits queued then,
-- Q = (time - since) / T as an exact fraction (none when the time is not after since), stay
-- queued and depart d/p us apart from since: the time becomes since + Q x d/p, rounded up to the
-- next 1/p us, and no later than 2^52 us (the latest time any value holds). With the same rate
-- it is the time itself; a queue beyond the new size is kept (it drains before anything else is
-- admitted). C++ twin: keep_queue in src/algorithms/gcra.cpp.
-- Why in pieces: the span Q x d in 1/p us reaches 2^92; its whole microseconds are summed from
-- pieces that each stay below 2^53, and a piece that alone reaches the room left below 2^52
-- means the cap.
if us > since or (us == since and f > 0) then
  local room = MAX_EXACT - since
  -- The backlog B = bq * sd + br (+ f/den) us: Q = bq * den + (br * den + f) / sd = whole + r/sd.
  local backlog = us - since
  local bq = IDIV(backlog, sd)
  local g, r = muldiv(backlog - bq * sd, den, sd)
  r = r + f
  local extra = IDIV(r, sd)
  g, r = g + extra, r - extra * sd  -- whole = bq * den + g, g < den, r < sd
  -- whole = wq * p + wr, from bq * den = a * p + ra; whole * d / p is at least wq.
  local qa = IDIV(bq, p)
  local most = IDIV(room, den)
  local capped = qa > most
  local wq, wr = 0, 0
  if not capped then
    local a, ra = muldiv(bq, den, p)
    local gq = IDIV(g, p)
    wq, wr = a + gq, ra + g - gq * p
    if wr >= p then wq, wr = wq + 1, wr - p end
    most = IDIV(room, d)
    capped = wq > most
  end
  -- span = wq * d * p + wr * d + ceil(r * d / sd) = (wq * d + e) * p + er + c.
  local whole_us, frac = 0, 0
  if not capped then
    local e, er = muldiv(wr, d, p)
    local c, cr = muldiv(r, d, sd)
    if cr > 0 then c = c + 1 end
    local t = er + c
    local tq = IDIV(t, p)
    whole_us, frac = wq * d + e + tq, t - tq * p
    capped = whole_us >= room
  end
  if capped then us, f = MAX_EXACT, 0 else us, f = since + whole_us, frac end
else
  us, f = since, 0
end
den = p
