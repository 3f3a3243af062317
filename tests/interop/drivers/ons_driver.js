#!/usr/bin/env node
/*
 * Interop driver for ali-ons@3.12.0 (pure-JavaScript RocketMQ 4.x client).
 *
 *   node ons_driver.js produce --namesrv H:P --topic T --group G --count N [--tags TagA,TagB] [--key-prefix k]
 *                              [--prop k=v ...]
 *   node ons_driver.js consume --namesrv H:P --topic T --group G (--expr "TagA || TagB" | --sql "a > 3")
 *                              --expect N --timeout S [--from first|last] [--linger 2]
 *
 * One JSON object per line on stdout, each with ts (epoch seconds, to the millisecond, when it was printed) (events:
 * started, sent, received, rejected, client_error, error, timeout, done; a consumer's queues: the queues of its topic
 * it owns, at start and at every change). Exit codes: 0 ok, 1 send/start failure, 2 usage error, 3 consume timeout,
 * 4 watchdog. produce --interval-ms MS --keep-going --count N sends every MS ms whatever each send ends in.
 *
 * ali-ons is looked up with require('ali-ons'), then under $INTEROP_DIR/node/node_modules, then under
 * <repo>/.interop/node/node_modules.
 */
'use strict';

const fs = require('fs');
const path = require('path');
const crypto = require('crypto');

// ------------------------------------------------------------------------------------------- output

function emit(event, fields) {
  // ts: epoch seconds (to the millisecond) when printed
  const line = JSON.stringify(Object.assign({ event }, fields || {}, { ts: Date.now() / 1000 })) + '\n';
  // Synchronous write: nothing is lost on process.exit().
  let buf = Buffer.from(line, 'utf8');
  while (buf.length) {
    try {
      const n = fs.writeSync(1, buf);
      buf = buf.slice(n);
    } catch (e) {
      if (e.code === 'EAGAIN') continue;
      throw e;
    }
  }
}

function logErr(...args) {
  process.stderr.write(`[${new Date().toISOString()}] ${args.map(a => (a && a.stack) || String(a)).join(' ')}\n`);
}

function errFields(err) {
  return {
    error: `${(err && err.name) || 'Error'}: ${(err && err.message) || String(err)}`,
    error_type: (err && err.name) || 'Error',
    error_code: err && err.code !== undefined ? err.code : undefined,
  };
}

function exit(code) {
  // stderr may be a pipe written asynchronously: give it a moment, then exit hard.
  setTimeout(() => process.exit(code), 50).unref();
  process.exitCode = code;
}

// ------------------------------------------------------------------------------------------ args

const SPEC = {
  common: {
    namesrv: { type: 'string', required: true },
    topic: { type: 'string', required: true },
    group: { type: 'string', required: true },
    'access-key': { type: 'string', def: 'sievemq-dummy-ak' },
    'secret-key': { type: 'string', def: 'sievemq-dummy-sk' },
    'no-acl': { type: 'bool', def: false },
    'instance': { type: 'string' },
    timeout: { type: 'number', def: 60 },
    verbose: { type: 'bool', def: false },
    'heartbeat-interval-ms': { type: 'number' },
    'poll-namesrv-interval-ms': { type: 'number' },
    'rebalance-interval-ms': { type: 'number' },
    'persist-interval-ms': { type: 'number' },
  },
  produce: {
    count: { type: 'number', def: 1 },
    'start-index': { type: 'number', def: 0 },
    tags: { type: 'string', def: '' },
    'key-prefix': { type: 'string', def: '' },
    prop: { type: 'list', def: [] },
    body: { type: 'string', def: 'body-{i}' },
    'body-size': { type: 'number', def: 0 },
    'delay-level': { type: 'number', def: 0 },
    'interval-ms': { type: 'number', def: 0 },
    'send-timeout-ms': { type: 'number', def: 3000 },
    'retry-times': { type: 'number', def: 2 },
    'keep-going': { type: 'bool', def: false },
  },
  consume: {
    expr: { type: 'string' },
    sql: { type: 'string' },
    expect: { type: 'number', def: 0 },
    linger: { type: 'number', def: 2 },
    from: { type: 'string', def: 'last' },
    model: { type: 'string', def: 'clustering' },
    reconsume: { type: 'number', def: 0 },
    'max-body-print': { type: 'number', def: 4096 },
    'max-reconsume-times': { type: 'number', def: 16 },
  },
};

function usage(msg) {
  process.stderr.write(`${msg}\nusage: ons_driver.js produce|consume --namesrv H:P --topic T --group G [options]\n`);
  emit('error', { stage: 'usage', fatal: true, error: msg });
  exit(2);
  return null;
}

function parseArgs(argv) {
  const cmd = argv[0];
  if (cmd !== 'produce' && cmd !== 'consume') return usage(`unknown subcommand ${JSON.stringify(cmd)}`);
  const spec = Object.assign({}, SPEC.common, SPEC[cmd]);
  const out = {};
  for (const [k, s] of Object.entries(spec)) if (s.def !== undefined) out[k] = Array.isArray(s.def) ? [] : s.def;
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) return usage(`unexpected argument ${a}`);
    let name = a.slice(2);
    let val;
    const eq = name.indexOf('=');
    if (eq >= 0) {
      val = name.slice(eq + 1);
      name = name.slice(0, eq);
    }
    const s = spec[name];
    if (!s) return usage(`unknown option --${name}`);
    if (s.type === 'bool') {
      out[name] = val === undefined ? true : !/^(0|false|no)$/i.test(val);
      continue;
    }
    if (val === undefined) {
      if (i + 1 >= argv.length) return usage(`--${name} needs a value`);
      val = argv[++i];
    }
    if (s.type === 'number') {
      const n = Number(val);
      if (!Number.isFinite(n)) return usage(`--${name} wants a number, got ${val}`);
      out[name] = n;
    } else if (s.type === 'list') {
      out[name].push(val);
    } else {
      out[name] = val;
    }
  }
  for (const [k, s] of Object.entries(spec)) {
    if (s.required && out[k] === undefined) return usage(`--${k} is required`);
  }
  if (cmd === 'consume') {
    if (out.expr !== undefined && out.sql !== undefined) return usage('give --expr or --sql, not both');
    if (!['first', 'last', 'timestamp'].includes(out.from)) return usage('--from must be first, last or timestamp');
    if (!['clustering', 'broadcasting'].includes(out.model)) return usage('--model must be clustering or broadcasting');
  }
  out.cmd = cmd;
  return out;
}

// ---------------------------------------------------------------------------------------- ali-ons

function loadOns() {
  const tries = [];
  try {
    return require('ali-ons');
  } catch (e) {
    tries.push(`require('ali-ons'): ${e.message.split('\n')[0]}`);
  }
  const dirs = [];
  if (process.env.INTEROP_DIR) dirs.push(path.join(process.env.INTEROP_DIR, 'node', 'node_modules'));
  dirs.push(path.resolve(__dirname, '..', '..', '..', '.interop', 'node', 'node_modules'));
  for (const d of dirs) {
    try {
      return require(path.join(d, 'ali-ons'));
    } catch (e) {
      tries.push(`${d}: ${e.message.split('\n')[0]}`);
    }
  }
  throw new Error(`ali-ons not found (${tries.join('; ')}); run tests/interop/setup_clients.sh`);
}

function makeLogger(verbose) {
  return {
    debug: (...a) => { if (verbose) logErr('[debug]', require('util').format(...a)); },
    info: (...a) => { if (verbose) logErr('[info]', require('util').format(...a)); },
    warn: (...a) => logErr('[warn]', require('util').format(...a)),
    error: (...a) => logErr('[error]', require('util').format(...a)),
  };
}

function clientOptions(args) {
  const opts = {
    // Unused with nameSrv, but the RemotingClient constructor asserts that one is given.
    httpclient: { request: async () => { throw new Error('httpclient is not used with nameSrv'); } },
    nameSrv: args.namesrv.includes(';') ? args.namesrv.split(';') : args.namesrv,
    logger: makeLogger(args.verbose),
  };
  if (!args['no-acl']) {
    // With keys set, ali-ons signs every request (extFields AccessKey, Signature, OnsChannel=ALIYUN).
    opts.accessKeyId = args['access-key'];
    opts.accessKeySecret = args['secret-key'];
  }
  if (args.instance) opts.instanceName = args.instance;
  if (args['heartbeat-interval-ms'] !== undefined) opts.heartbeatBrokerInterval = args['heartbeat-interval-ms'];
  if (args['poll-namesrv-interval-ms'] !== undefined) opts.pollNameServerInteval = args['poll-namesrv-interval-ms'];
  if (args['rebalance-interval-ms'] !== undefined) opts.rebalanceInterval = args['rebalance-interval-ms'];
  if (args['persist-interval-ms'] !== undefined) opts.persistConsumerOffsetInterval = args['persist-interval-ms'];
  return opts;
}

function md5(buf) {
  return crypto.createHash('md5').update(buf || Buffer.alloc(0)).digest('hex');
}

function buildBody(template, i, size) {
  let body = Buffer.from(template.split('{i}').join(String(i)), 'utf8');
  if (size && body.length < size) body = Buffer.concat([ body, Buffer.alloc(size - body.length, 'x') ]);
  return body;
}

function withTimeout(promise, ms, what) {
  let t;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      t = setTimeout(() => reject(Object.assign(new Error(`${what} timed out after ${ms}ms`), { name: 'TimeoutError' })), ms);
    }),
  ]).finally(() => clearTimeout(t));
}

function startWatchdog(seconds, what) {
  const t = setTimeout(() => {
    emit('error', { stage: 'watchdog', fatal: true, error_type: 'WatchdogTimeout', error: `watchdog: ${what} did not finish within ${seconds}s` });
    process.exit(4);
  }, seconds * 1000);
  t.unref();
  return t;
}

// ------------------------------------------------------------------------------------------ produce

async function produce(ons, args) {
  const deadline = Date.now() + args.timeout * 1000;
  startWatchdog(args.timeout + 10, 'produce');
  const tags = args.tags ? args.tags.split(',').filter(Boolean) : [];
  const props = args.prop.map(p => {
    const eq = p.indexOf('=');
    if (eq < 0) throw Object.assign(new Error(`--prop wants K=V, got ${p}`), { name: 'UsageError' });
    return [ p.slice(0, eq), p.slice(eq + 1) ];
  });

  const producer = new ons.Producer(Object.assign(clientOptions(args), {
    producerGroup: args.group,
    sendMsgTimeout: args['send-timeout-ms'],
    retryTimesWhenSendFailed: args['retry-times'],
  }));
  producer.on('error', err => emit('client_error', errFields(err)));
  // ali-ons retries a refused send and then throws a generic error without the broker's answer; note the
  // response code of the last refused attempt so that a failed send can report it (observation only).
  let lastResponse;
  const sendKernelImpl = producer.sendKernelImpl.bind(producer);
  producer.sendKernelImpl = async (...a) => {
    try {
      return await sendKernelImpl(...a);
    } catch (err) {
      if (err && err.code !== undefined) lastResponse = { response_code: err.code, response_remark: err.message };
      throw err;
    }
  };
  try {
    await withTimeout(producer.ready(), Math.max(1, deadline - Date.now()), 'producer start');
  } catch (err) {
    emit('error', Object.assign({ stage: 'start', fatal: true }, errFields(err)));
    return 1;
  }
  emit('started', { role: 'producer', group: args.group, topic: args.topic });

  let failed = 0;
  let sent = 0;
  for (let i = args['start-index']; i < args['start-index'] + args.count; i++) {
    const body = buildBody(args.body, i, args['body-size']);
    const info = { i, body_len: body.length, body_md5: md5(body) };
    let msg;
    if (tags.length) {
      info.tags = tags[i % tags.length];
      msg = new ons.Message(args.topic, info.tags, body);
    } else {
      // Two-argument form: a third undefined argument would store TAGS="undefined".
      msg = new ons.Message(args.topic, body);
    }
    if (args['key-prefix']) {
      info.keys = `${args['key-prefix']}${i}`;
      msg.keys = [ info.keys ];
    }
    if (props.length) {
      info.props = {};
      for (const [ k, v ] of props) {
        info.props[k] = v.split('{i}').join(String(i));
        msg.properties[k] = info.props[k];
      }
    }
    if (args['delay-level']) msg.delayTimeLevel = args['delay-level'];
    const t0 = Date.now();
    lastResponse = undefined;
    try {
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw Object.assign(new Error('overall --timeout reached'), { name: 'TimeoutError' });
      const r = await withTimeout(producer.send(msg), remaining, 'send');
      sent++;
      emit('sent', Object.assign(info, {
        msg_id: r.msgId,
        status: r.sendStatus,
        offset: r.queueOffset,
        queue_id: r.messageQueue && r.messageQueue.queueId !== undefined ? Number(r.messageQueue.queueId) : undefined,
        broker: r.messageQueue ? r.messageQueue.brokerName : undefined,
      }));
    } catch (err) {
      failed++;
      emit('error', Object.assign({ stage: 'send', i, elapsed_ms: Date.now() - t0 }, errFields(err), lastResponse));
      if (!args['keep-going']) break;
    }
    if (args['interval-ms']) await new Promise(r => setTimeout(r, args['interval-ms']));
  }
  try {
    await withTimeout(producer.close(), 5000, 'producer close');
  } catch (err) {
    logErr('producer close:', err);
  }
  emit('done', { role: 'producer', sent, failed });
  return failed ? 1 : 0;
}

// ------------------------------------------------------------------------------------------ consume

function describe(msg, args) {
  const body = msg.body || Buffer.alloc(0);
  const props = Object.assign({}, msg.properties || {});
  for (const k of Object.keys(props)) if (props[k] === null || props[k] === undefined) delete props[k];
  return {
    msg_id: msg.msgId,
    topic: msg.topic,
    tags: msg.tags || null,
    keys: (msg.properties && msg.properties.KEYS) || null,
    body: body.slice(0, args['max-body-print']).toString('utf8'),
    body_len: body.length,
    body_md5: md5(body),
    props,
    queue_id: msg.queueId,
    queue_offset: msg.queueOffset,
    reconsume_times: msg.reconsumeTimes,
    commit_log_offset: msg.commitLogOffset,
    born_timestamp: msg.bornTimestamp,
    store_timestamp: msg.storeTimestamp,
    born_host: msg.bornHost,
    store_host: msg.storeHost,
    sys_flag: msg.sysFlag,
    flag: msg.flag,
  };
}

async function consume(ons, args) {
  const started = Date.now();
  startWatchdog(args.timeout + args.linger + 30, 'consume');
  // Installed before anything is printed, so a SIGTERM right after 'started' still ends with 'done'.
  let stopped = false;
  let stopResolve;
  const stop = new Promise(r => { stopResolve = r; });
  const onSig = () => { stopped = true; stopResolve(); };
  process.on('SIGTERM', onSig);
  process.on('SIGINT', onSig);
  const fromWhere = {
    first: 'CONSUME_FROM_FIRST_OFFSET',
    last: 'CONSUME_FROM_LAST_OFFSET',
    timestamp: 'CONSUME_FROM_TIMESTAMP',
  }[args.from];
  const consumer = new ons.Consumer(Object.assign(clientOptions(args), {
    consumerGroup: args.group,
    consumeFromWhere: fromWhere,
    isBroadcast: args.model === 'broadcasting',
    maxReconsumeTimes: args['max-reconsume-times'],
  }));
  consumer.on('error', err => emit('client_error', errFields(err)));

  const seen = new Map();
  const accepted = new Map();
  let deliveries = 0;
  let reachedResolve;
  const reached = new Promise(r => { reachedResolve = r; });
  let isReached = false;

  const subExpr = args.sql !== undefined ? { expressionType: 'SQL92', subString: args.sql } : (args.expr || '*');
  try {
    consumer.subscribe(args.topic, subExpr, async msg => {
      try {
        const d = describe(msg, args);
        const p = d.props;
        const key = String(p.UNIQ_KEY || p.ORIGIN_MESSAGE_ID || d.msg_id);
        deliveries++;
        const n = (seen.get(key) || 0) + 1;
        seen.set(key, n);
        d.delivery = n;
        if (n <= args.reconsume) {
          emit('rejected', d);
          return ons.Consumer.ACTION_RETRY;
        }
        const c = (accepted.get(key) || 0) + 1;
        accepted.set(key, c);
        emit('received', Object.assign(d, { duplicate: c > 1, elapsed_s: (Date.now() - started) / 1000 }));
        if (args.expect && accepted.size >= args.expect && !isReached) {
          isReached = true;
          reachedResolve();
        }
      } catch (err) {
        emit('error', Object.assign({ stage: 'callback' }, errFields(err)));
      }
      return undefined;
    });
    await withTimeout(consumer.ready(), args.timeout * 1000, 'consumer start');
  } catch (err) {
    emit('error', Object.assign({ stage: 'start', fatal: true }, errFields(err)));
    return 1;
  }
  // ready() resolves before the first rebalance has assigned queues; with --from last, messages sent before
  // that are (correctly) skipped. Wait (bounded) until this consumer owns queues of the topic, so 'started'
  // means "pulling". Uses the internal _processQueueTable (ali-ons 3.12.0).
  let queues = null;
  const table = consumer._processQueueTable;
  if (table && typeof table.values === 'function') {
    const until = Date.now() + Math.min(15000, args.timeout * 1000);
    const owned = () => Array.from(table.values()).filter(v => v && v.messageQueue && v.messageQueue.topic === args.topic).length;
    while (owned() === 0 && !stopped && Date.now() < until) await new Promise(r => setTimeout(r, 50));
    queues = owned();
  }
  emit('started', {
    queues,
    role: 'consumer', group: args.group, topic: args.topic,
    expr: args.sql !== undefined ? null : subExpr, sql: args.sql !== undefined ? args.sql : null,
    from_where: args.from, model: args.model,
  });

  // 'queues' whenever the set of queues of the topic this consumer owns changes (its own rebalance's view: tests
  // wait for it rather than for time)
  let lastQueues = null;
  const watchQueues = table && typeof table.values === 'function' ? setInterval(() => {
    const now = Array.from(table.values())
      .filter(v => v && v.messageQueue && v.messageQueue.topic === args.topic && !v.dropped)
      .map(v => Number(v.messageQueue.queueId)).sort((a, b) => a - b);
    if (now.join(',') !== lastQueues) {
      lastQueues = now.join(',');
      emit('queues', { topic: args.topic, queues: now });
    }
  }, 100) : null;

  const sleep = ms => new Promise(r => setTimeout(r, Math.max(0, ms)));

  let code = 0;
  if (args.expect > 0) {
    const left = started + args.timeout * 1000 - Date.now();
    await Promise.race([ reached, stop, sleep(left) ]);
    if (!isReached && !stopped) code = 3;
  }
  if (code === 0 && !stopped) await Promise.race([ stop, sleep(args.linger * 1000) ]);

  const summary = {
    deliveries,
    unique: accepted.size,
    duplicates: Array.from(accepted.values()).reduce((a, c) => a + c - 1, 0),
  };
  if (code === 3) emit('timeout', Object.assign({ expect: args.expect, timeout: args.timeout }, summary));
  if (watchQueues) clearInterval(watchQueues);
  try {
    await withTimeout(consumer.close(), 5000, 'consumer close');
  } catch (err) {
    logErr('consumer close:', err);
  }
  emit('done', Object.assign({ role: 'consumer', exit_code: code }, summary));
  return code;
}

// ----------------------------------------------------------------------------------------------- main

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (!args) return;
  process.on('unhandledRejection', err => {
    emit('client_error', Object.assign({ unhandled: true }, errFields(err)));
  });
  process.on('uncaughtException', err => {
    emit('error', Object.assign({ stage: 'uncaught', fatal: true }, errFields(err)));
    process.exit(1);
  });
  let ons;
  try {
    ons = loadOns();
  } catch (err) {
    emit('error', Object.assign({ stage: 'import', fatal: true }, errFields(err)));
    exit(2);
    return;
  }
  let code;
  try {
    code = args.cmd === 'produce' ? await produce(ons, args) : await consume(ons, args);
  } catch (err) {
    emit('error', Object.assign({ stage: args.cmd, fatal: true }, errFields(err)));
    code = err && err.name === 'UsageError' ? 2 : 1;
  }
  exit(code);
}

main();
