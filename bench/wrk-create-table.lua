-- POST a create-table request with a fresh name each time (Polaris benchmark shape:
-- 10 required int columns, identifier field 1, 10 properties).
local counter = 0
local thread_id = 0
local prefix = os.getenv("FLOE_BENCH_PREFIX") or "t"

function setup(thread)
  thread:set("id", thread_id)
  thread_id = thread_id + 1
end

local fields = {}
for i = 1, 10 do
  fields[#fields + 1] = string.format('{"id":%d,"name":"column%d","type":"int","required":true}', i, i)
end
local props = {}
for i = 0, 9 do
  props[#props + 1] = string.format('"InitialAttribute_%d":"%d"', i, i)
end
local body_tail = ',"schema":{"type":"struct","schema-id":0,"identifier-field-ids":[1],"fields":['
  .. table.concat(fields, ",") .. ']},"properties":{' .. table.concat(props, ",") .. '}}'

request = function()
  counter = counter + 1
  local body = string.format('{"name":"%s_%d_%d"', prefix, id or 0, counter) .. body_tail
  return wrk.format("POST", nil, { ["Content-Type"] = "application/json" }, body)
end
