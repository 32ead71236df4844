-- wrk script for bench/crowd: the API's checkout, one body for every
-- request (the script's first argument), each request under an
-- Idempotency-Key of its own (a storefront's shoppers are each their own
-- request), signed with the key given as the second argument.
local counter = 0
local id = 0
local body = ""
local token = ""
function setup(thread)
  id = id + 1
  thread:set("tid", id)
end
function init(args)
  body = args[1]
  token = args[2]
end
function request()
  counter = counter + 1
  return wrk.format("POST", "/api/v1/checkouts", {
    ["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer " .. token,
    ["Idempotency-Key"] = "crowd-" .. tid .. "-" .. counter,
  }, body)
end
