-- libbulkhead cluster leases, protocol 1 (docs/cluster.md).
--
-- One hash per shared limit, KEYS[1] = "{bh:<name>}" (the braces are a Redis
-- Cluster hash tag; the script touches no other key). Its fields:
--   p        the protocol version          L  the global limit
--   T        the lease, in microseconds    E  the epoch: creation time (us)
--   U        end of the learning period (us, the store's clock)
--   i:<id>   one instance: "<expiry us> <granted> <counted> <want>"
--   s:<id>   the sequence number of its last renewal applied here
--   x:<id>   an instance that left: "<expiry us>", for one lease
-- "counted" is what the store reserves for the instance until its next
-- renewal: max(granted, the limit it enforced, its permits in flight).
-- Every time is the store's own (TIME); Redis 5 and later replicate a
-- script by its effects, so reading the clock before writing is allowed.
--
-- ARGV[1] op, ARGV[2] the caller's protocol, then:
--   renew id limit lease_us check adopt fresh want cap applied held epoch seq
--     -> { granted, epoch, limit, instances, excess, learning_us, lease_us,
--          target }
--   leave id   -> 1 when the instance was registered, else 0
--   limit n    -> n
local PROTO = 1
local key = KEYS[1]
local op = ARGV[1]

if tonumber(ARGV[2]) ~= PROTO then
	return redis.error_reply('BHPROTO the script speaks ' .. PROTO .. ', the caller ' .. ARGV[2])
end
local kind = redis.call('TYPE', key)['ok']
if kind ~= 'hash' and kind ~= 'none' then
	return redis.error_reply('BHTYPE ' .. key .. ' holds a ' .. kind)
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local function int(x)
	return string.format('%d', x)
end

-- Read everything, noting the instances whose lease ran out on this clock.
-- Nothing is written before the key is known to be ours, in our protocol:
-- Redis does not undo a script's writes when it then returns an error, and
-- a hash of someone else's (or of another protocol) must stay as it was.
local meta, inst, seqs, gone, dead = {}, {}, {}, {}, {}
local raw = redis.call('HGETALL', key)
for i = 1, #raw, 2 do
	local f, v = raw[i], raw[i + 1]
	if string.sub(f, 1, 2) == 's:' then
		seqs[string.sub(f, 3)] = tonumber(v)
	elseif string.sub(f, 1, 2) == 'x:' then
		if (tonumber(v) or 0) <= now then
			dead[#dead + 1] = f
		else
			gone[string.sub(f, 3)] = true
		end
	elseif string.sub(f, 1, 2) == 'i:' then
		local e, g, c, w = string.match(v, '^(%d+) (%d+) (%d+) (%d+)$')
		if not e then
			return redis.error_reply('BHTYPE ' .. key .. ' has a field that is not ours')
		end
		if tonumber(e) <= now then
			dead[#dead + 1] = f
		else
			inst[string.sub(f, 3)] = { tonumber(g), tonumber(c), tonumber(w) }
		end
	else
		meta[f] = v
	end
end
if #raw > 0 and meta.p == nil then
	return redis.error_reply('BHTYPE ' .. key .. ' is a hash that is not ours')
end
if meta.p ~= nil and tonumber(meta.p) ~= PROTO then
	return redis.error_reply('BHPROTO ' .. key .. ' holds protocol ' .. meta.p)
end
-- Ours: drop what ran out. A sequence number outlives its instance's
-- record by no call.
for _, f in ipairs(dead) do
	redis.call('HDEL', key, f)
end
for k in pairs(seqs) do
	if inst[k] == nil then
		redis.call('HDEL', key, 's:' .. k)
		seqs[k] = nil
	end
end

if op == 'leave' then
	if meta.p == nil then
		return 0
	end
	redis.call('HDEL', key, 's:' .. ARGV[3])
	-- A renewal of the departed instance that reaches the store late
	-- must not register it again: remember for a lease that it left.
	redis.call('HSET', key, 'x:' .. ARGV[3], int(now + tonumber(meta.T)))
	return redis.call('HDEL', key, 'i:' .. ARGV[3])
end

if op == 'limit' then
	if meta.p == nil then
		return redis.error_reply('BHNONE ' .. key .. ' does not exist')
	end
	redis.call('HSET', key, 'L', ARGV[3])
	return tonumber(ARGV[3])
end

if op ~= 'renew' then
	return redis.error_reply('BHPROTO unknown operation')
end

local id = ARGV[3]
local limit, lease = tonumber(ARGV[4]), tonumber(ARGV[5])
local check, adopt, fresh = ARGV[6] == '1', ARGV[7] == '1', ARGV[8] == '1'
local want, cap = tonumber(ARGV[9]), tonumber(ARGV[10])
local applied, held = tonumber(ARGV[11]), tonumber(ARGV[12])
local known_epoch = ARGV[13]
local seq = tonumber(ARGV[14])
-- A renewal that reaches the store after a later one of the same instance
-- (it was given up on, its connection closed, and a retransmission or a
-- proxy delivered it late) must not replace the later record: the instance
-- enforces the later answer, and the older request may count less.
if gone[id] or (seq ~= nil and seqs[id] ~= nil and seq < seqs[id]) then
	return redis.error_reply('BHSTALE a renewal older than the last one')
end

if meta.p == nil then
	-- Nothing here: a first start, or the store lost its data while
	-- instances held leases granted before. Until one lease has passed,
	-- re-grant only what renewing instances already use (a learning
	-- period), unless the caller vouches that the store is new and has
	-- never held a lease from an older one.
	meta = { L = limit, T = lease, E = now, U = now + lease }
	if fresh and known_epoch == '0' then
		meta.U = now
	end
	redis.call('HSET', key, 'p', PROTO, 'L', int(meta.L), 'T', int(meta.T),
		'E', int(meta.E), 'U', int(meta.U))
else
	meta.L, meta.T = tonumber(meta.L), tonumber(meta.T)
	meta.E, meta.U = tonumber(meta.E), tonumber(meta.U)
	if check and meta.T ~= lease then
		return redis.error_reply('BHMISMATCH lease ' .. int(meta.T) .. ' us at the store, ' ..
			int(lease) .. ' us here')
	end
	if check and meta.L ~= limit and not adopt then
		return redis.error_reply('BHMISMATCH limit ' .. int(meta.L) .. ' at the store, ' ..
			int(limit) .. ' here')
	end
end
local L = meta.L

-- Max-min fair targets (water filling over the wants), then what no one
-- wants split evenly, so that idle instances have room for a burst; and
-- what every other live instance keeps counted. A split that does not come
-- out even gives its odd permits by id. Only when the split is 0 (fewer
-- permits than instances that want them) do they go in turn, a new turn
-- every lease, or the same instances would get 0 forever. Otherwise the
-- order stays put: every instance judges the turn at its own renewal, and
-- a turn that moved between two renewals would leave an odd permit to
-- nobody for the renewals it takes to move it.
inst[id] = nil
local wants, others, n = { { want, id } }, 0, 1
for k, v in pairs(inst) do
	wants[#wants + 1] = { v[3], k }
	others = others + v[2]
	n = n + 1
end
table.sort(wants, function(a, b)
	if a[1] ~= b[1] then
		return a[1] < b[1]
	end
	return a[2] < b[2]
end)
-- The caller's place among ids (sorted), counted from this lease's turn
-- when they rotate, else from the first.
local function turn(ids, rotate)
	table.sort(ids)
	local start = rotate and math.floor(now / meta.T) % #ids or 0
	for i, k in ipairs(ids) do
		if k == id then
			return (i - 1 - start) % #ids + 1
		end
	end
end
local left, rest, target, short = L, n, nil, {}
for _, w in ipairs(wants) do
	if #short == 0 and w[1] * rest <= left then
		if w[2] == id then
			target = w[1]
		end
		left, rest = left - w[1], rest - 1
	else
		short[#short + 1] = w[2]
	end
end
if #short > 0 then
	-- Those left want more than an even split of what is left: each gets
	-- that split, and the odd permits go by id, in turn when the split is 0
	-- (level + 1 <= their want).
	local level = math.floor(left / #short)
	if target == nil then
		target = level
		if turn(short, level == 0) <= left - level * #short then
			target = target + 1
		end
	end
else
	local all = {}
	for i, w in ipairs(wants) do
		all[i] = w[2]
	end
	target = target + math.floor(left / n)
	if turn(all, false) <= left % n then
		target = target + 1
	end
end
target = math.min(target, cap)

-- Grant the target as far as the others leave room; while learning, no
-- instance gets more than it already enforces.
local granted = math.max(0, math.min(target, L - others))
if now < meta.U then
	granted = math.min(granted, applied)
end
local counted = math.max(granted, applied, held)
redis.call('HSET', key, 'i:' .. id,
	int(now + lease) .. ' ' .. int(granted) .. ' ' .. int(counted) .. ' ' .. int(want))
if seq ~= nil then
	redis.call('HSET', key, 's:' .. id, int(seq))
end
-- Abandoned limits go away a day after their last renewal.
redis.call('PEXPIRE', key, math.floor(lease / 1000) + 86400000)
return { granted, meta.E, L, n, math.max(0, others + counted - L),
	math.max(0, meta.U - now), meta.T, target }
