-- A stored count `count`, admitted under a limit of `old_limit`, as it counts under `limit` when
-- the state is carried over to changed parameters: kept (carry 0, as_is), scaled by
-- limit / old_limit rounding up (1, proportional), or zeroed (2, reset). Included as statements
-- into the window algorithms' fragments. C++ twin: carried_count in
-- src/algorithms/window_carry.hpp.
if carry == 1 then
  local q, r = muldiv(count, limit, old_limit)
  if r > 0 then q = q + 1 end
  count = q
elseif carry == 2 then
  count = 0
end
