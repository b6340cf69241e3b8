// The peer bench/compare measures redlimit against: rate-limiter-flexible's RateLimiterRedis
// (a fixed window: one Lua script per consume(), sent with EVALSHA by ioredis, both in their
// default configuration). Keeps --in-flight consume() calls in flight on one ioredis connection,
// each on a key drawn uniformly from --keys keys (named as redlimit_bench names them), for
// --seconds, then prints one JSON object with the fields redlimit_bench prints (client_cpu_us:
// this process's CPU per decision).
//
// usage: node rate_limiter_flexible.js --url redis://127.0.0.1:PORT [--in-flight N] [--keys K]
//          [--seconds S] [--points P] [--duration D]
//        (the modules come from NODE_PATH: bench/compare installs them under the build dir)
//
// The default limit, 1,000 points per key per 1 s window, is redlimit_bench's gcra limit (1,000/s,
// a burst of 1,000) as a fixed window: with many keys it allows every call, and each call is then
// what an allowed gcra decision is, one script that reads and writes its key. A consume() over
// the limit rejects with a RateLimiterRes: that is a decision (not counted in "allowed"), not an
// error.
'use strict';

const { parseArgs } = require('node:util');
const Redis = require('ioredis');
const { RateLimiterRedis, RateLimiterRes } = require('rate-limiter-flexible');

const { values: opts } = parseArgs({
  options: {
    url: { type: 'string' },
    'in-flight': { type: 'string', default: '256' },
    keys: { type: 'string', default: '100000' },
    seconds: { type: 'string', default: '5' },
    points: { type: 'string', default: '1000' },
    duration: { type: 'string', default: '1' },
  },
});
if (!opts.url) throw new Error('rate_limiter_flexible.js: --url is required');
const inFlight = Number(opts['in-flight']);
const keys = Number(opts.keys);
const seconds = Number(opts.seconds);
const points = Number(opts.points);
const duration = Number(opts.duration);

// The p-th quantile (0..1) of sorted latencies, nearest rank.
function quantile(sorted, p) {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)];
}

// The server's mean time per script call since the last CONFIG RESETSTAT, from INFO
// commandstats: ioredis sends EVALSHA, and EVAL once when the script is not yet loaded.
async function serverUsecPerCall(redis) {
  const info = await redis.info('commandstats');
  let calls = 0;
  let usec = 0;
  for (const m of info.matchAll(/^cmdstat_eval(?:sha)?:calls=(\d+),usec=(\d+)/gm)) {
    calls += Number(m[1]);
    usec += Number(m[2]);
  }
  return calls > 0 ? usec / calls : 0;
}

async function main() {
  const redis = new Redis(opts.url);
  const limiter = new RateLimiterRedis({ storeClient: redis, points, duration });
  // Connects and loads the script before the clock starts.
  await limiter.consume('warm-up');
  await redis.config('RESETSTAT');

  const latenciesUs = [];
  let allowed = 0;
  const start = process.hrtime.bigint();
  const end = start + BigInt(Math.round(seconds * 1e9));
  const cpuStart = process.cpuUsage();

  // One of the --in-flight loops: a new consume() as soon as the previous one is decided.
  async function loop() {
    while (process.hrtime.bigint() < end) {
      const key = `k${String(Math.floor(Math.random() * keys)).padStart(12, '0')}`;
      const sent = process.hrtime.bigint();
      try {
        await limiter.consume(key);
        ++allowed;
      } catch (e) {
        if (!(e instanceof RateLimiterRes)) throw e;
      }
      latenciesUs.push(Number(process.hrtime.bigint() - sent) / 1000);
    }
  }
  await Promise.all(Array.from({ length: inFlight }, loop));

  const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  const cpu = process.cpuUsage(cpuStart);
  const serverUsec = await serverUsecPerCall(redis);
  redis.disconnect();

  const sorted = Float64Array.from(latenciesUs).sort();
  console.log(JSON.stringify({
    bench: 'rate-limiter-flexible',
    algorithm: 'fixed_window',
    points,
    duration_s: duration,
    in_flight: inFlight,
    keys,
    connections: 1,
    seconds: Number(elapsed.toFixed(3)),
    decisions: sorted.length,
    allowed,
    per_second: Number((sorted.length / elapsed).toFixed(1)),
    p50_us: Number(quantile(sorted, 0.5).toFixed(1)),
    p99_us: Number(quantile(sorted, 0.99).toFixed(1)),
    p999_us: Number(quantile(sorted, 0.999).toFixed(1)),
    client_cpu_us: Number(((cpu.user + cpu.system) / Math.max(1, sorted.length)).toFixed(2)),
    server_usec_per_call: Number(serverUsec.toFixed(2)),
    allocations_per_decision: null,
  }));
}

main().catch((e) => {
  console.error(`rate_limiter_flexible.js: ${e.stack || e}`);
  process.exit(1);
});
