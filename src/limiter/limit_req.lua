-- sluice: one limit_req decision, atomically, over the keys of one or more
-- limit_req lines (one key per zone and client), for every algorithm of
-- src/limiter/algorithm/ with exactly its integer arithmetic: the same
-- decision, excess, wait, remaining and reset as the memory store.
--
-- KEYS[i]          the state of limit i (see "States" below)
-- ARGV[1]          mode: "charge" | "check" | "account"
--                    charge:  look every key up in order; stop at the first
--                             one that refuses (nothing stored anywhere);
--                             if all pass, store every key.
--                    check:   the same lookups, never store (nginx's held
--                             nodes, accounted later by "account").
--                    account: store every key, no refusal (nginx's
--                             accounting of held limits).
-- ARGV[2]          "" to use the server clock (TIME), else a millisecond
--                  time given by the caller (tests, replays)
-- ARGV[3+5(i-1)..] limit i, five values: algorithm (its name in the
--                  configuration), count, period_ms (the rate is count per
--                  period), burst (milli-requests), rate (nginx's truncated
--                  milli-requests per second: what the leaky bucket leaks)
--
-- Returns {1, e1, r1, t1, ..., en, rn, tn}: accepted; for limit i the
--                  excess (stored, or what would be stored for "check"),
--                  the requests remaining and the ms until one more (0, 0
--                  for a limit "account" stored past its limit)
--      or {0, i, excess, wait_ms, now, last, value, aux}: limit i refuses
--                  with `excess`; a request would be admitted in wait_ms;
--                  `now` is the time decided at, and last, value, aux the
--                  key's stored cell (0, 0, 0 for a sliding log), which a
--                  refusal leaves as it is: what an instance's rejection
--                  cache (src/limiter/redis/cache.rs) decides from until
--                  the key admits again.
--
-- Exactness. Lua numbers are doubles, exact for integers below 2^53. Every
-- quantity here is an integer: times in ms (below 2^42), counts (below
-- 2^30), a bucket's units (at most (burst + 1) * period, below 2^49).
-- Nothing multiplies an absolute time: buckets compare the time elapsed
-- since their state (or ahead of now) with what it can refill, windows
-- divide. Divisions go through idiv; a product that may pass 2^53 (a
-- sliding window of a billion requests per day) goes through muldiv, which
-- falls back to long multiplication. Numbers are written with %.0f, never
-- tostring (which keeps 14 digits).

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

-- A stored state is kept this much longer than it matters (clock steps).
local MARGIN = 1000
local TWO53 = 9007199254740992

------------------------------------------------------------------ integers

-- floor(a / b) for integers 0 <= a < 2^53, 0 < b, exactly.
local function idiv(a, b)
  local q = math.floor(a / b)
  while q * b > a do q = q - 1 end
  while (q + 1) * b <= a do q = q + 1 end
  return q
end

-- ceil(a / b), same domain.
local function ceil_div(a, b)
  local q = idiv(a, b)
  if q * b < a then q = q + 1 end
  return q
end

-- floor(a * b / c) for integers a, b < 2^53, 0 < c < 2^52, whose result is
-- below 2^53, even when a * b is not.
local function muldiv(a, b, c)
  local q = idiv(a, c)
  local r = a - q * c
  -- q * b is at most the result; r < c is what is left to multiply.
  local whole = q * b
  if r * b < TWO53 then return whole + idiv(r * b, c) end
  -- r * b = hi * c + rem, built one bit of b at a time, rem < c throughout.
  local hi, rem, bit = 0, 0, 1
  while bit * 2 <= b do bit = bit * 2 end
  while bit >= 1 do
    hi, rem = hi * 2, rem * 2
    if rem >= c then hi, rem = hi + 1, rem - c end
    if b >= bit then
      b = b - bit
      rem = rem + r
      if rem >= c then hi, rem = hi + 1, rem - c end
    end
    bit = bit / 2
  end
  return whole + hi
end

local function max0(x)
  if x < 0 then return 0 end
  return x
end

local function int(x)
  return string.format('%.0f', x)
end

------------------------------------------------------------------- storage

-- The numbers in fields `...` of hash `key`, or nil when one is missing (a
-- key never seen). A key of another type (the zone changed algorithm to or
-- from sliding_log across a reload) is dropped: as new.
local function fields(key, ...)
  local s = redis.pcall('HMGET', key, ...)
  if s.err then
    redis.call('DEL', key)
    return nil
  end
  local out = {}
  for i = 1, select('#', ...) do
    out[i] = tonumber(s[i])
    if out[i] == nil then return nil end
  end
  return out
end

-- A key never seen is the all-zero cell, as in the memory store.
local function cell(key, ...)
  return fields(key, ...) or {0, 0, 0}
end

local function expire_in(key, ms)
  redis.call('PEXPIRE', key, int(ms + MARGIN))
end

-- Every algorithm is a table of three functions: load(key, p) -> state
-- (with `cell`, the stored {last, value, aux}, when the key has one);
-- check(state, p) -> admit, excess, wait_ms, remaining, reset_ms;
-- charge(key, state, p) -> excess (stores the state and its expiry). `p`:
-- count, period, burst, rate. Redis runs this whole chunk on every call, so
-- an algorithm's table is made (define[name]()) only when a key needs it.
local define = {}

--------------------------------------------- leaky_bucket: {e = excess, l}
-- nginx's (bucket.rs): milli-requests, leak truncated at rate*ms/1000.

define.leaky_bucket = function()
  local leaky = {}

  function leaky.load(key, p)
    local s = fields(key, 'e', 'l')
    -- A new state: excess 0, last = now.
    if s == nil then return {x = 0, moved = true} end
    local e, l = s[1], s[2]
    local ms = now - l
    if ms < -60000 then ms = 1 elseif ms < 0 then ms = 0 end
    -- e + 1000 - rate*ms/1000, clamped at 0 (a product past 2^53 still
    -- compares correctly: rounding is monotone).
    local full = e + 1000
    local x = 0
    if ms * p.rate < full * 1000 then x = full - idiv(ms * p.rate, 1000) end
    return {x = x, moved = ms ~= 0, e = e, ms = ms, cell = {l, e, 0}}
  end

  function leaky.check(st, p)
    local x = st.x
    if x > p.burst then
      -- until the excess leaks down to the burst: ceil(need*1000/rate) - ms
      local need = st.e + 1000 - p.burst
      return false, x, max0(ceil_div(need * 1000, p.rate) - st.ms)
    end
    -- what the burst still holds; the time to leak one request more
    local remaining = idiv(max0(p.burst - x), 1000)
    local target = p.burst - remaining * 1000
    local reset = ceil_div(max0(x + 1000 - target) * 1000, p.rate)
    return true, x, 0, remaining, reset
  end

  function leaky.charge(key, st, p)
    local x = st.x
    if st.moved then
      redis.call('HSET', key, 'e', int(x), 'l', int(now))
    else
      redis.call('HSET', key, 'e', int(x))
    end
    -- Kept until a request would find it empty anyway (x + 1000 leaked),
    -- plus a second for clock steps; at least nginx's minute.
    local ttl = idiv((x + 1000) * 1000, p.rate) + 1 + 1000
    if ttl < 60000 then ttl = 60000 end
    redis.call('PEXPIRE', key, int(ttl))
    return x
  end

  return leaky
end

------------------------------------- token_bucket and gcra (token.rs, gcra.rs)
-- Units: a request costs `period`, `count` units come back each ms; the
-- capacity is (burst + 1) requests.

-- check_deficit: the decision for a bucket missing `d` units.
local function bucket_check(p, d)
  local cost = p.period
  local cap = (idiv(p.burst, 1000) + 1) * cost
  local with = d + cost
  local excess = muldiv(d, 1000, cost)
  if with > cap then
    return false, excess, ceil_div(with - cap, p.count)
  end
  local remaining = idiv(cap - with, cost)
  local need = with - (cap - (remaining + 1) * cost)
  return true, excess, 0, remaining, ceil_div(need, p.count)
end

-- token_bucket: {last = ms, deficit = units missing as of last}.
define.token_bucket = function()
  local token = {}

  function token.load(key, p)
    local s = cell(key, 'last', 'deficit')
    local last, v = s[1], s[2]
    -- The units missing now: v - (now - last) * count, at least 0. When the
    -- elapsed time is past v / count, the product (which may pass 2^53) is
    -- not needed: the bucket is full.
    local d = v
    if now > last then
      local ms = now - last
      if ms > idiv(v, p.count) then d = 0 else d = v - ms * p.count end
    end
    return {last = last, d = d, cell = {last, v, 0}}
  end

  function token.check(st, p)
    return bucket_check(p, st.d)
  end

  function token.charge(key, st, p)
    local d = st.d + p.period
    -- A clock that went back credits nothing, now or later.
    local last = st.last
    if now > last then last = now end
    redis.call('HSET', key, 'last', int(last), 'deficit', int(d))
    -- Full again (as new) once d units came back.
    expire_in(key, last - now + ceil_div(d, p.count))
    return muldiv(st.d, 1000, p.period)
  end

  return token
end

-- gcra: {tat = ms, frac = 1/count ms}: the theoretical arrival time.
define.gcra = function()
  local gcra = {}

  function gcra.load(key, p)
    local s = cell(key, 'tat', 'frac')
    -- max(TAT - now, 0) in units of 1/count ms; (tat - now) * count is at
    -- most what the last charge added, below the capacity.
    local ahead = 0
    if s[1] >= now then ahead = (s[1] - now) * p.count + s[2] end
    return {ahead = ahead, cell = {s[1], s[2], 0}}
  end

  function gcra.check(st, p)
    return bucket_check(p, st.ahead)
  end

  function gcra.charge(key, st, p)
    local d = st.ahead + p.period
    local whole = idiv(d, p.count)
    local tat, frac = now + whole, d - whole * p.count
    redis.call('HSET', key, 'tat', int(tat), 'frac', int(frac))
    -- As new once the TAT is not ahead: at tat (exactly on it) or just after.
    local at = tat
    if frac ~= 0 then at = tat + 1 end
    expire_in(key, at - now)
    return muldiv(st.ahead, 1000, p.period)
  end

  return gcra
end

---------------------------------------------------- windows (window.rs)
-- Windows are `period` long, aligned to time 0 (the Unix epoch).

local function start_of(p)
  return idiv(now, p.period) * p.period
end

-- fixed_window: {window = start ms, count = admitted in it}.
define.fixed_window = function()
  local fixed = {}

  function fixed.load(key, p)
    local s = cell(key, 'window', 'count')
    local ws = start_of(p)
    local stored = {s[1], s[2], 0}
    -- A stored window later than now (the clock went back) stays current.
    if s[1] >= ws then return {ws = s[1], cur = s[2], cell = stored} end
    return {ws = ws, cur = 0, cell = stored}
  end

  function fixed.check(st, p)
    local with = st.cur + 1
    local until_end = max0(st.ws + p.period - now)
    if with > p.count then return false, (with - 1) * 1000, until_end end
    return true, (with - 1) * 1000, 0, p.count - with, until_end
  end

  function fixed.charge(key, st, p)
    redis.call('HSET', key, 'window', int(st.ws), 'count', int(st.cur + 1))
    expire_in(key, st.ws + p.period - now)
    return st.cur * 1000
  end

  return fixed
end

-- sliding_window: {window = start ms, count = admitted in it, prev = the
-- previous window's count}. The estimate of the last period is
-- prev * w / period + count, w = what of the previous window still
-- overlaps it; multiplied through by period, comparisons are exact.
define.sliding_window = function()
  local sliding = {}

  function sliding.load(key, p)
    local s = cell(key, 'window', 'count', 'prev')
    local l, v, a = s[1], s[2], s[3]
    local ws = start_of(p)
    local prev, cur = 0, 0
    if l > ws then
      ws, prev, cur = l, a, v
    elseif l == ws then
      prev, cur = a, v
    elseif l + p.period == ws then
      prev = v
    end
    local into = max0(now - ws)
    local w = p.period - math.min(into, p.period)
    return {ws = ws, into = into, prev = prev, cur = cur, w = w,
      cell = {l, v, a}}
  end

  -- prev * w + (cur + extra) * period < count * period: with c = cur + extra
  -- below count, floor(prev * w / period) < count - c says the same.
  local function slide_admits(s, p, extra)
    local c = s.cur + extra
    return c < p.count and muldiv(s.prev, s.w, p.period) < p.count - c
  end

  -- Milliseconds from now until a request passes, `extra` more counted in
  -- the current window (Slide::wait).
  local function slide_wait(s, p, extra)
    local c, limit, period = s.cur + extra, p.count, p.period
    if c < limit then
      if s.prev == 0 then return 0 end
      -- The smallest x with prev * (period - x) < (limit - c) * period.
      local x = 0
      if s.prev >= limit - c then
        x = muldiv(s.prev - (limit - c), period, s.prev) + 1
      end
      if x < period then return max0(x - s.into) end
    end
    -- The next window, where c is the previous count.
    local x = 0
    if c >= limit then x = muldiv(c - limit, period, c) + 1 end
    return max0(s.ws + period + x - now)
  end

  -- The estimate with `with` requests in the current window, minus one, in
  -- milli-requests.
  local function slide_excess(s, p, with)
    return muldiv(s.prev * 1000, s.w, p.period) + (with - 1) * 1000
  end

  function sliding.check(s, p)
    local excess = slide_excess(s, p, s.cur + 1)
    if not slide_admits(s, p, 0) then
      return false, excess, slide_wait(s, p, 0)
    end
    -- ceil((count * period - prev * w) / period), at least 0.
    local room = max0(p.count - muldiv(s.prev, s.w, p.period))
    local remaining = max0(room - (s.cur + 1))
    return true, excess, 0, remaining, slide_wait(s, p, 1 + remaining)
  end

  function sliding.charge(key, s, p)
    redis.call('HSET', key, 'window', int(s.ws), 'count', int(s.cur + 1),
      'prev', int(s.prev))
    -- As new once neither window counts any more.
    expire_in(key, s.ws + 2 * p.period - now)
    return slide_excess(s, p, s.cur + 1)
  end

  return sliding
end

------------------------------------------------ sliding_log (log.rs)
-- A list of the admitted times, oldest first; a time t counts while
-- t + period > now. At most `count` times.

define.sliding_log = function()
  local slog = {}

  local function at(key, i)
    return tonumber(redis.call('LINDEX', key, i))
  end

  function slog.load(key, p)
    local n = redis.pcall('LLEN', key)
    if type(n) == 'table' then
      redis.call('DEL', key)
      n = 0
    end
    -- The first live time: the expired ones are a prefix (binary search,
    -- one LINDEX when none expired).
    local lo, hi = 0, n
    if n > 0 and at(key, 0) + p.period > now then hi = 0 end
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if at(key, mid) + p.period <= now then lo = mid + 1 else hi = mid end
    end
    return {key = key, n = n, first = lo}
  end

  function slog.check(st, p)
    local live = st.n - st.first
    local with = live + 1
    if with > p.count then
      -- `with - count` of the live times must leave the window.
      local t = at(st.key, st.first + with - p.count - 1)
      return false, (with - 1) * 1000, max0(t + p.period - now)
    end
    -- One more than `remaining`: the oldest live time must leave (this
    -- request's own if there is none).
    local oldest = now
    if live > 0 then oldest = math.min(at(st.key, st.first), now) end
    local reset = max0(oldest + p.period - now)
    return true, (with - 1) * 1000, 0, p.count - with, reset
  end

  function slog.charge(key, st, p)
    local n = st.n - st.first
    if st.first > 0 then redis.call('LTRIM', key, int(st.first), -1) end
    if n >= p.count then
      redis.call('LPOP', key)
      n = n - 1
    end
    -- Kept in order if the clock went back.
    local t = now
    if n > 0 then t = math.max(at(key, -1), now) end
    redis.call('RPUSH', key, int(t))
    expire_in(key, t + p.period - now)
    return n * 1000
  end

  return slog
end

--------------------------------------------------------------- the decision

local n = #KEYS
local made, limits, states, checked = {}, {}, {}, {}
for i = 1, n do
  local b = 3 + 5 * (i - 1)
  local p = {
    count = tonumber(ARGV[b + 1]),
    period = tonumber(ARGV[b + 2]),
    burst = tonumber(ARGV[b + 3]),
    rate = tonumber(ARGV[b + 4]),
  }
  local name = ARGV[b]
  local alg = made[name]
  if alg == nil then
    if define[name] == nil then
      return redis.error_reply('sluice: unknown algorithm ' .. tostring(name))
    end
    alg = define[name]()
    made[name] = alg
  end
  local st = alg.load(KEYS[i], p)
  local admit, excess, wait, remaining, reset = alg.check(st, p)
  if mode ~= 'account' and not admit then
    local c = st.cell or {0, 0, 0}
    return {0, i, excess, wait, now, c[1], c[2], c[3]}
  end
  limits[i], states[i] = {alg = alg, p = p}, st
  if admit then
    checked[i] = {excess, remaining, reset}
  else
    checked[i] = {excess, 0, 0}
  end
end

local out = {1}
for i = 1, n do
  local c = checked[i]
  if mode ~= 'check' then
    c[1] = limits[i].alg.charge(KEYS[i], states[i], limits[i].p)
  end
  out[#out + 1] = c[1]
  out[#out + 1] = c[2]
  out[#out + 1] = c[3]
end
return out
