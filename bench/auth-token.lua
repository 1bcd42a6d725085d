-- wrk script: POST client credentials to the token endpoint.
-- FLOE_BENCH_CLIENT_ID / FLOE_BENCH_CLIENT_SECRET name the principal.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
wrk.body = "grant_type=client_credentials&scope=catalog&client_id="
  .. os.getenv("FLOE_BENCH_CLIENT_ID") .. "&client_secret=" .. os.getenv("FLOE_BENCH_CLIENT_SECRET")
