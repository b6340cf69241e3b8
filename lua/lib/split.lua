-- Splits the stored value `stored` ("a:b:c...") at its colons into `fields`, numbers in order.
-- Included as statements: into split_value (lib/exact.lua) and into the algorithms' fragments,
-- which define no function (see lua/shapes/lean.lua).
local fields, count, from = {}, 0, 1
while true do
  local colon = string.find(stored, ':', from, true)
  count = count + 1
  if not colon then
    fields[count] = tonumber(string.sub(stored, from))
    break
  end
  fields[count] = tonumber(string.sub(stored, from, colon - 1))
  from = colon + 1
end
