-- wrk script for bench/http-checkout: every request is a different shopper
-- with its own basket cookie, form key, e-mail and address (X-Forwarded-For,
-- believed only by a server that trusts 127.0.0.1 as its proxy), posting
-- the checkout form as the basket page gives it (a key that says when the
-- form was made, the basket's one line of the tier). Shopper n of thread t
-- uses basket lpad(hex((base + t) * 1000000 + n), 64).
local counter = 0
local id = 0
local base = 0
local lines = ""
function setup(thread)
  id = id + 1
  thread:set("tid", id)
end
function init(args)
  base = tonumber(args[1] or "0")
  -- [["tier",1]], form-encoded
  lines = "%5B%5B%22" .. (args[2] or "") .. "%22%2C1%5D%5D"
end
function request()
  counter = counter + 1
  local n = (base + tid) * 1000000 + counter
  local key = (os.time() * 1000) .. "-load-" .. n
  local body = "checkout_key=" .. key .. "&lines=" .. lines .. "&name=Load&email=load-" .. n .. "%40example.com"
  local a = n % 16777216
  local address = string.format("10.%d.%d.%d", math.floor(a / 65536), math.floor(a / 256) % 256, a % 256)
  return wrk.format("POST", "/checkout", {
    ["Content-Type"] = "application/x-www-form-urlencoded",
    ["Cookie"] = "hf_basket=" .. string.format("%064x", n),
    ["X-Forwarded-For"] = address,
  }, body)
end
