-- wrk script: POST the JSON body held in the file named after `--`, and print one summary
-- line (prefixed BENCH_JSON) that bench/wrk.py parses. Latencies are in microseconds.

function init(args)
  local f = assert(io.open(args[1], "rb"))
  wrk.body = f:read("*a")
  f:close()
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests": %.0f, "duration_us": %.0f, "p50_us": %.0f, "p99_us": %.0f, '
      .. '"errors": {"connect": %.0f, "read": %.0f, "write": %.0f, "status": %.0f, "timeout": %.0f}}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect, e.read, e.write, e.status, e.timeout))
end
