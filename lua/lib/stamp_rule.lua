-- What the stamp of a stored state says to a request (statements, at the level of the
-- includer's write section; every algorithm includes it once where it reads its state). C++
-- twin: stamp_rule in src/algorithms/stamp.hpp. docs/algorithms.md, "Changing a policy".
--
-- Needs the policy epoch pv, sent_since (the since the request sent, before it was clamped to
-- now) and carry; spv, the version field of the state's stamp (nil when it has none: no state,
-- or a value of the previous release); and other, true when the stamp's parameters differ from
-- the request's.
--
-- A request that follows a store (pv > 0): a stamp of a newer version refuses it (`stale`); one
-- of other parameters or of another version is restamped, with the carry as sent; the stamp
-- written holds pv.
-- A request that follows no store (pv 0): the version field holds a reset tag, the since
-- (unclamped) of the last Carry::reset change that reached the state, 0 if none. A reset is due
-- when carry is reset and the tag is older than sent_since: the state is restamped, converted
-- with carry reset, and tagged sent_since. Otherwise a reset sent is not applied again (carry
-- becomes as_is: this reset, or a later one, already reached the state), the state is restamped
-- only when its parameters differ, and the tag is kept, also by writers that never reset: so
-- another process of the same name (pv 0, as_is) never erases it, and a reset frees permits
-- once per key, whatever the clocks (a since ahead of Redis's now is compared as sent).
--
-- Leaves restamp (false without a stamp: the includer decides what a value without one
-- becomes), stamp_pv (the version field of the stamp to write), and carry: the carry a
-- conversion applies.
local restamp, stamp_pv = spv ~= nil and other, pv
if pv > 0 then
  if spv and spv > pv then
    stale, restamp = spv, false
  elseif spv and spv ~= pv then
    restamp = true
  end
else
  stamp_pv = spv or 0
  if carry == 2 then
    if stamp_pv < sent_since then
      stamp_pv, restamp = sent_since, spv ~= nil
    else
      carry = 0
    end
  end
end
