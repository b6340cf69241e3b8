-- The refund and give_back of the keys that store a time (algorithms/gcra.lua, leaky_bucket.lua;
-- statements): moves (to, to_f), the time as loaded, back by n*T (step, step_f in 1/p us),
-- never before now. give_back moves it back by n*T less the time since the take (what the take
-- may still hold), and not at all after a clock step back or a policy change since the take
-- (taken_at later than now, or `rewrite`): that time cannot be told; nor when the includer's
-- `scheduled_after` says a request was scheduled after the take: it keeps its slot (nothing
-- moves it, as a cancellation does its waiters), and the permits given back would be given
-- again on top of it.
local back, back_f = step, step_f
if op == 'give_back' then
  back = step - elapsed_since_take
  if taken_at > now or rewrite or scheduled_after then back = -1 end
end
if back >= 0 then
  to, to_f = to - back, to_f - back_f
  if to_f < 0 then to, to_f = to - 1, to_f + p end
  if to < now then to, to_f = now, 0 end
end
