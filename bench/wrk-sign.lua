-- POST one remote-signing request (its JSON body from FLOE_BENCH_SIGN_BODY) again and
-- again: what /sign costs per request (authorization checks plus a SigV4 signature).
local body = os.getenv("FLOE_BENCH_SIGN_BODY")

request = function()
  return wrk.format("POST", nil, { ["Content-Type"] = "application/json" }, body)
end
