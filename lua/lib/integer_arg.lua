-- An integer argument in [low, high], or an error raised before any write.
local function integer_arg(value, name, low, high)
  local n = tonumber(value)
  if n == nil or n ~= floor(n) or n < low or n > high then
    error('redlimit: argument ' .. name .. ' must be an integer in [' .. low .. ', ' .. high ..
          '], got ' .. tostring(value))
  end
  return n
end
