-- wrk script for bench/drop: the crowd reloading its places in line; each
-- thread walks the entries' tokens (one per line of the file named by the
-- script's first argument), from its own starting point.
local tokens = {}
local at = 0
local id = 0
function setup(thread)
  id = id + 1
  thread:set("tid", id)
end
function init(args)
  for line in io.lines(args[1]) do
    tokens[#tokens + 1] = line
  end
  at = (tid * 7919) % #tokens
end
function request()
  at = at % #tokens + 1
  return wrk.format("GET", "/waitlist/entry/" .. tokens[at])
end
