-- The stored value `value` of the level `left` at time t (statements; the format as
-- lib/load_tokens.lua describes).
local value
if version > 0 then
  value = string.format('%d:%d:%d:%d:%d:%d', left, t, d, version, cancels, epoch)
else
  value = string.format('%d:%d:%d', left, t, d)
end
