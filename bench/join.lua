-- wrk script for bench/drop: every request is a new shopper joining the
-- drop's pre-queue with an e-mail of their own (thread t's n-th is
-- drop-<t>-<n>@example.com). The product is the script's first argument.
local counter = 0
local id = 0
local product = ""
function setup(thread)
  id = id + 1
  thread:set("tid", id)
end
function init(args)
  product = args[1] or ""
end
function request()
  counter = counter + 1
  local body = "name=Drop+shopper&qty=1&email=drop-" .. tid .. "-" .. counter .. "%40example.com"
  return wrk.format("POST", "/waitlist/" .. product, {
    ["Content-Type"] = "application/x-www-form-urlencoded",
  }, body)
end
