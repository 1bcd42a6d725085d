-- A blind set-properties commit (no requirements), as the Polaris benchmark's table
-- update: a different key each time, so every commit writes new metadata.
local counter = 0
request = function()
  counter = counter + 1
  local body = string.format(
    '{"requirements":[],"updates":[{"action":"set-properties","updates":{"NewAttribute_%d":"%d"}}]}',
    counter % 10, counter)
  return wrk.format("POST", nil, { ["Content-Type"] = "application/json" }, body)
end
