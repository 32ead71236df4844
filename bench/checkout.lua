-- wrk script for bench/http-checkout: every request is a different shopper
-- with its own basket cookie, form key, e-mail and address (X-Forwarded-For,
-- believed only by a server that trusts 127.0.0.1 as its proxy), posting
-- the checkout form. Shopper n of thread t uses basket
-- lpad(hex((base + t) * 1000000 + n), 64).
local counter = 0
local id = 0
local base = 0
function setup(thread)
  id = id + 1
  thread:set("tid", id)
end
function init(args)
  base = tonumber(args[1] or "0")
end
function request()
  counter = counter + 1
  local n = (base + tid) * 1000000 + counter
  local body = "checkout_key=load-" .. n .. "&name=Load&email=load-" .. n .. "%40example.com"
  local a = n % 16777216
  local address = string.format("10.%d.%d.%d", math.floor(a / 65536), math.floor(a / 256) % 256, a % 256)
  return wrk.format("POST", "/checkout", {
    ["Content-Type"] = "application/x-www-form-urlencoded",
    ["Cookie"] = "hf_basket=" .. string.format("%064x", n),
    ["X-Forwarded-For"] = address,
  }, body)
end
