-- sluice: nginx's limit_req decision for one request, atomically, over the
-- keys of one or more limit_req lines (one key per zone and client), when
-- every key is a leaky bucket: the fast path of limit_req.lua (which
-- decides every algorithm, with the same arithmetic for this one, at about
-- 1.6 times the cost inside Redis). The two must agree; the Redis tests
-- compare both with the memory store.
--
-- KEYS[i]          the state of limit i: a hash {e = excess, l = last}
-- ARGV[1]          mode: "charge" | "check" | "account"
--                    charge:  look every key up in order; stop at the first
--                             one over its burst (nothing stored anywhere);
--                             if all pass, store every key.
--                    check:   the same lookups, never store (nginx's held
--                             nodes, accounted later by "account").
--                    account: store every key, no burst check (nginx's
--                             accounting of held limits).
-- ARGV[2]          "" to use the server clock (TIME), else a millisecond
--                  time given by the caller (tests, replays)
-- ARGV[1+2i]       rate of limit i, milli-requests per second (> 0)
-- ARGV[2+2i]       burst of limit i, milli-requests
--
-- Returns {1, e1, ..., en}: accepted; ei is the excess of limit i (stored,
--                            or what would be stored for "check")
--      or {0, i, excess, wait_ms, now, l, e, 0}: limit i is over its burst
--                            with `excess`; a request would be accepted in
--                            wait_ms; `now` is the time decided at and l, e
--                            the key's state (limit_req.lua's refusal).
--
-- Units and truncation are nginx's (nginx-limit-req.md §3): integer
-- milliseconds, milli-requests, integer division. Lua numbers are doubles:
-- every product below stays under 2^53 and divisions go through idiv, so
-- the results are exact integers.

-- Redis 3.2-4 replicate scripts verbatim unless told otherwise, and refuse
-- writes after TIME; from Redis 5 effects replication is the default (7: the
-- only mode, and this call a no-op).
if redis.replicate_commands then redis.replicate_commands() end

local mode = ARGV[1]
local now
if ARGV[2] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[2])
end

-- floor(a / b) for integers 0 <= a < 2^53, 0 < b, exactly.
local function idiv(a, b)
  local q = math.floor(a / b)
  while q * b > a do q = q - 1 end
  while (q + 1) * b <= a do q = q + 1 end
  return q
end

-- stored excess + 1000 - rate*ms/1000, clamped at 0.
local function step(e, rate, ms)
  local full = e + 1000
  if ms * rate >= full * 1000 then return 0 end
  return full - idiv(ms * rate, 1000)
end

local n = #KEYS
local excess, moved = {}, {}
for i = 1, n do
  local rate = tonumber(ARGV[1 + 2 * i])
  local burst = tonumber(ARGV[2 + 2 * i])
  -- A key another algorithm left in another type (a sliding log's list,
  -- after a reload changed the zone's algorithm) decides as new.
  local s = redis.pcall('HMGET', KEYS[i], 'e', 'l')
  if s.err then
    redis.call('DEL', KEYS[i])
    s = {false, false}
  end
  local e, l = tonumber(s[1]), tonumber(s[2])
  if e == nil or l == nil then
    -- a new state: excess 0, last = now
    excess[i], moved[i] = 0, true
  else
    local ms = now - l
    if ms < -60000 then ms = 1 elseif ms < 0 then ms = 0 end
    local x = step(e, rate, ms)
    if mode ~= 'account' and x > burst then
      -- until the excess leaks down to the burst: ceil(need*1000/rate) - ms
      local need = e + 1000 - burst
      local t = idiv(need * 1000, rate)
      if t * rate < need * 1000 then t = t + 1 end
      local wait = t - ms
      if wait < 0 then wait = 0 end
      return {0, i, x, wait, now, l, e, 0}
    end
    excess[i], moved[i] = x, ms ~= 0
  end
end

if mode ~= 'check' then
  for i = 1, n do
    local rate = tonumber(ARGV[1 + 2 * i])
    local x = excess[i]
    if moved[i] then
      redis.call('HSET', KEYS[i], 'e', string.format('%.0f', x), 'l', string.format('%.0f', now))
    else
      redis.call('HSET', KEYS[i], 'e', string.format('%.0f', x))
    end
    -- Keep the state until a request would find it empty anyway (x + 1000
    -- leaked), plus a second for clock steps; at least nginx's minute.
    local t = idiv((x + 1000) * 1000, rate) + 1
    local ttl = t + 1000
    if ttl < 60000 then ttl = 60000 end
    redis.call('PEXPIRE', KEYS[i], string.format('%.0f', ttl))
  end
end

local out = {1}
for i = 1, n do out[i + 1] = excess[i] end
return out
