-- wrk script for bench/drop: one client replaying one checkout form, made
-- before its tier sold out, over and over (a script at a drop). Its body
-- and basket cookie are the script's two arguments. Prints how many
-- answers were not the 409 sold-out page.
local body = ""
local cookie = ""
local threads = {}
other = 0
function setup(thread)
  table.insert(threads, thread)
end
function init(args)
  body = args[1]
  cookie = args[2]
end
function request()
  return wrk.format("POST", "/checkout", {
    ["Content-Type"] = "application/x-www-form-urlencoded",
    ["Cookie"] = "hf_basket=" .. cookie,
  }, body)
end
function response(status, headers, body)
  if status ~= 409 then
    other = other + 1
  end
end
function done(summary, latency, requests)
  local total = 0
  for _, thread in ipairs(threads) do
    total = total + thread:get("other")
  end
  io.write(string.format("not 409: %d\n", total))
end
