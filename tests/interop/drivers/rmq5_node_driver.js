#!/usr/bin/env node
/*
 * Interop driver for the official RocketMQ 5.x Node.js client (rocketmq-client-nodejs@1.0.8, gRPC), through
 * sievemq's proxy (docs/proxy.md). The Node.js twin of tests/interop/drivers/rmq5_driver.py.
 *
 *   node rmq5_node_driver.js produce --endpoints H:P --topic T --count N [--tag TagA] [--key-prefix k]
 *                                    [--key TEMPLATE ...] [--prop k=v ...] [--group G (FIFO: message group)]
 *                                    [--groups G1,G2,... (FIFO: message i in group G[i % n], body
 *                                    "<group>-<i // n>")] [--delay-ms MS (DELAY: deliveryTimestamp MS ms later)]
 *                                    [--interval-ms MS (between sends; a failed one is printed, the next follows)]
 *   node rmq5_node_driver.js tx-produce --endpoints H:P --topic T --count N [--end commit|rollback|none]
 *                                    [--check-answer commit|rollback|unknown] [--linger S]
 *   node rmq5_node_driver.js simple-consume --endpoints H:P --topic T --group G [--tag-expr "A || B" | --sql "a > 5"]
 *                                    --count N [--invisible S] [--await S|default] [--batch N] [--timeout S] [--linger S]
 *                                    [--hold-first K] [--change S]
 *   node rmq5_node_driver.js push-consume --endpoints H:P --topic T --group G [--tag-expr E | --sql E] --count N
 *                                    [--fail-first K] [--fail-body B [--fail-times N]] [--sleep S] [--timeout S]
 *                                    [--linger S]
 *
 * With RMQ5_ACCESS_KEY and RMQ5_SECRET_KEY in the environment the client signs its calls with that account.
 *
 * Templates (--key, --prop values) may hold "{i}", the message's index. --key-prefix k gives message i the key "k<i>".
 *
 * One JSON object per line on stdout, each with "ts", the driver's clock (epoch ms) when it was printed: started,
 * sent (i, message_id, offset, keys, body, group, send_ts: epoch ms just before the send call, delivery_ms: the
 * message's deliveryTimestamp), ready (a simple consumer after its first receive call came back, even empty; a push
 * consumer half a second after it sent its first), received (message_id, topic, body, tag, keys, properties,
 * attempt, group, offset, delivery_ms, born_ms, corrupted, late; a simple consumer's also receive_ts: epoch ms when
 * the receive call that returned it began), acked (message_id), changed (message_id, invisible_ms, change_ts: epoch
 * ms just before the call), ended (i, message_id, end), checked (message_id, body, answer: a transaction
 * check-back), settled (the client ended a checked transaction), error (error, error_code), timeout, done.
 * A consumer stops after `count` acked messages, then keeps receiving for `--linger` seconds: what comes in then is
 * printed with "late": true (and acked), so a test can assert that nothing came back. With --hold-first K a
 * simple consumer does not ack its first K deliveries (they come back after the invisible time); with --change S it
 * first sets each held message's invisible time to S seconds. A push consumer fails its first K deliveries and every
 * delivery (the first --fail-times ones) of the message whose body is --fail-body (each printed as "failed"), takes
 * --sleep seconds over each, and
 * prints "overlap" (group, body) when it is handed a message while another of the same message group is in its
 * listener.
 *
 * tx-produce begins one transaction per message (the client allows one message per transaction), sends the message
 * in it (body and key "tx-<i>") and ends it with --end (none: leaves it open). Its transaction checker (the Producer's
 * `checker` option) answers the brokers' check-backs, which come over the Telemetry stream, with --check-answer
 * (default: --end's resolution; unknown: the client does not end it). It then stays up at most --linger seconds for
 * check-backs: until every open transaction was checked and settled.
 *
 * Exit codes: 0 ok, 1 send/start failure, 2 usage error, 3 consume timeout (fewer than `count` acked), 4 watchdog.
 *
 * The client is looked up under $INTEROP_DIR/node-rmq5/node_modules, then <repo>/.interop/node-rmq5/node_modules
 * (tests/interop/setup_clients.sh installs it there). Its own log goes to ./rocketmq_client_nodejs.log (the driver's
 * working directory); its push-consumer internals log to $HOME/logs/rocketmq/ whatever logger is given.
 */
'use strict';

const fs = require('fs');
const path = require('path');
const util = require('util');

// ------------------------------------------------------------------------------------------- output

function emit(event, fields) {
  const line = JSON.stringify(Object.assign({ event }, fields || {}, { ts: Date.now() })) + '\n';
  // Synchronous write: nothing is lost on process.exit().
  let buf = Buffer.from(line, 'utf8');
  while (buf.length) {
    try {
      const n = fs.writeSync(1, buf);
      buf = buf.subarray(n);
    } catch (e) {
      if (e.code === 'EAGAIN') continue;
      throw e;
    }
  }
}

function logErr(...args) {
  process.stderr.write(`[${new Date().toISOString()}] ${args.map(a => (a && a.stack) || String(a)).join(' ')}\n`);
}

/** An error, its `cause` chain (the client wraps a server status in one or two Errors) and the first code found. */
function errFields(err) {
  const text = e => `${(e && e.name) || 'Error'}: ${(e && e.message) || String(e)}`;
  const causes = [];
  let code;
  for (let e = err, depth = 0; e && depth < 5; e = e.cause, depth++) {
    if (depth > 0) causes.push(text(e));
    if (code === undefined && e.code !== undefined) code = e.code;
  }
  return { error: text(err), causes: causes.length ? causes : undefined, error_code: code };
}

function exit(code) {
  // grpc-js channels and the client's timers keep the loop alive: exit hard once stdout/stderr had a moment.
  process.exitCode = code;
  setTimeout(() => process.exit(code), 50).unref();
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

// ------------------------------------------------------------------------------------------- client

function loadClient() {
  const roots = [];
  if (process.env.INTEROP_DIR) roots.push(path.join(process.env.INTEROP_DIR, 'node-rmq5', 'node_modules'));
  roots.push(path.resolve(__dirname, '..', '..', '..', '.interop', 'node-rmq5', 'node_modules'));
  for (const root of roots) {
    const dir = path.join(root, 'rocketmq-client-nodejs');
    if (fs.existsSync(path.join(dir, 'package.json'))) {
      return {
        rmq: require(dir),
        // FilterType (TAG = 1, SQL = 2) is not re-exported by the package's index.
        definition: require(path.join(dir, 'proto', 'apache', 'rocketmq', 'v2', 'definition_pb')),
        version: JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).version,
      };
    }
  }
  throw new Error(`rocketmq-client-nodejs not found under ${roots.join(' or ')}; run tests/interop/setup_clients.sh`);
}

/** The client's logger: a file in the working directory; warnings and errors also on stderr. `onLine(text)` sees
 * every line (the push consumer's driver learns from it when the client sent its first ReceiveMessage). */
function fileLogger(onLine) {
  const fd = fs.openSync(path.join(process.cwd(), 'rocketmq_client_nodejs.log'), 'a');
  const write = (level, args) => {
    const line = util.format(...args);
    if (onLine) onLine(line);
    const text = `${new Date().toISOString()} ${level} ${line}\n`;
    try {
      fs.writeSync(fd, text);
    } catch (e) {
      // the log is best-effort
    }
    if (level === 'WARN' || level === 'ERROR') process.stderr.write(`[client] ${text}`);
  };
  return {
    info: (...a) => write('INFO', a),
    warn: (...a) => write('WARN', a),
    error: (...a) => write('ERROR', a),
    debug: (...a) => write('DEBUG', a),
    close: () => {},
  };
}

// ------------------------------------------------------------------------------------------ args

const COMMON = {
  endpoints: { type: 'string' },
  topic: { type: 'string' },
  namespace: { type: 'string', default: '' },
  timeout: { type: 'string', default: '60' },
  'request-timeout': { type: 'string', default: '3' },
};
const SPECS = {
  produce: {
    ...COMMON,
    count: { type: 'string', default: '1' },
    tag: { type: 'string', default: '' },
    'key-prefix': { type: 'string', default: '' },
    key: { type: 'string', multiple: true, default: [] },
    prop: { type: 'string', multiple: true, default: [] },
    group: { type: 'string', default: '' },
    groups: { type: 'string', default: '' },
    'delay-ms': { type: 'string', default: '0' },
    'interval-ms': { type: 'string', default: '0' },
  },
  'tx-produce': {
    ...COMMON,
    count: { type: 'string', default: '1' },
    end: { type: 'string', default: 'commit' },
    'check-answer': { type: 'string', default: '' },
    linger: { type: 'string', default: '0' },
  },
  consume: {
    ...COMMON,
    group: { type: 'string' },
    'tag-expr': { type: 'string', default: '' },
    sql: { type: 'string', default: '' },
    count: { type: 'string', default: '1' },
    invisible: { type: 'string', default: '10' },
    await: { type: 'string', default: '2' },
    batch: { type: 'string', default: '16' },
    linger: { type: 'string', default: '0' },
    'hold-first': { type: 'string', default: '0' },
    change: { type: 'string', default: '0' },
    'fail-first': { type: 'string', default: '0' },
    'fail-body': { type: 'string', default: '' },
    'fail-times': { type: 'string', default: '1000000000' },
    sleep: { type: 'string', default: '0' },
  },
};
const REQUIRED = { produce: [ 'endpoints', 'topic' ], 'tx-produce': [ 'endpoints', 'topic' ],
  consume: [ 'endpoints', 'topic', 'group' ] };
const NUMBERS = [ 'timeout', 'request-timeout', 'count', 'invisible', 'await', 'batch', 'linger', 'hold-first',
  'change', 'fail-first', 'fail-times', 'sleep', 'delay-ms', 'interval-ms' ];

function parse(argv) {
  const cmd = argv[0];
  const kind = (cmd === 'produce' || cmd === 'tx-produce') ? cmd
    : (cmd === 'simple-consume' || cmd === 'push-consume') ? 'consume' : null;
  if (!kind) {
    throw new UsageError(`unknown command ${JSON.stringify(cmd)}: produce | tx-produce | simple-consume | push-consume`);
  }
  let values;
  try {
    ({ values } = util.parseArgs({ args: argv.slice(1), options: SPECS[kind], strict: true }));
  } catch (e) {
    throw new UsageError(e.message);
  }
  for (const name of REQUIRED[kind]) {
    if (!values[name]) throw new UsageError(`--${name} is required`);
  }
  for (const name of NUMBERS) {
    if (values[name] === undefined) continue;
    if (name === 'await' && values[name] === 'default') {
      values[name] = null; // the client's own default (30 s)
      continue;
    }
    const n = Number(values[name]);
    if (!Number.isFinite(n) || n < 0) throw new UsageError(`--${name} must be a number >= 0, got ${values[name]}`);
    values[name] = n;
  }
  if (values['tag-expr'] && values.sql) throw new UsageError('--tag-expr and --sql are exclusive');
  if (values.group && values.groups) throw new UsageError('--group and --groups are exclusive');
  if (kind === 'tx-produce') {
    if (![ 'commit', 'rollback', 'none' ].includes(values.end)) throw new UsageError('--end: commit | rollback | none');
    if (!values['check-answer']) values['check-answer'] = values.end === 'none' ? 'commit' : values.end;
    if (![ 'commit', 'rollback', 'unknown' ].includes(values['check-answer'])) {
      throw new UsageError('--check-answer: commit | rollback | unknown');
    }
  }
  return { cmd, args: values };
}

class UsageError extends Error {}

const fill = (template, i) => template.split('{i}').join(String(i));

function baseOptions(args, onLogLine) {
  return {
    endpoints: args.endpoints,
    namespace: args.namespace,
    requestTimeout: Math.max(1000, Math.round(args['request-timeout'] * 1000)),
    logger: fileLogger(onLogLine),
    ...(process.env.RMQ5_ACCESS_KEY ? { sessionCredentials: { accessKey: process.env.RMQ5_ACCESS_KEY,
      accessSecret: process.env.RMQ5_SECRET_KEY || '' } } : {}),
  };
}

// ------------------------------------------------------------------------------------------ produce

async function produce(client, args) {
  const { Producer } = client.rmq;
  const producer = new Producer({ ...baseOptions(args), topics: [ args.topic ] });
  try {
    await producer.startup();
  } catch (e) {
    emit('error', { fatal: true, stage: 'startup', ...errFields(e) });
    return 1;
  }
  emit('started', { role: 'producer', topic: args.topic, client: `rocketmq-client-nodejs@${client.version}`,
    client_id: producer.clientId });
  let failed = 0;
  const groups = args.groups.split(',').filter(g => g);
  try {
    for (let i = 0; i < args.count && !stopping; i++) {
      if (i && args['interval-ms']) await new Promise(resolve => setTimeout(resolve, args['interval-ms']));
      const keys = [];
      if (args['key-prefix']) keys.push(`${args['key-prefix']}${i}`);
      for (const t of args.key) keys.push(fill(t, i));
      const properties = new Map();
      for (const item of args.prop) {
        const at = item.indexOf('=');
        if (at <= 0) throw new UsageError(`--prop wants k=v, got ${JSON.stringify(item)}`);
        properties.set(item.slice(0, at), fill(item.slice(at + 1), i));
      }
      const message = { topic: args.topic, body: Buffer.from(`body-${i}`), keys };
      if (args.tag) message.tag = args.tag;
      if (properties.size) message.properties = properties;
      if (args.group) message.messageGroup = args.group;
      if (groups.length) { // FIFO messages of several message groups, interleaved
        message.messageGroup = groups[i % groups.length];
        message.body = Buffer.from(`${message.messageGroup}-${Math.floor(i / groups.length)}`);
      }
      const sendTs = Date.now();
      if (args['delay-ms']) message.deliveryTimestamp = new Date(sendTs + args['delay-ms']);
      try {
        const r = await producer.send(message);
        emit('sent', { i, message_id: r.messageId, offset: r.offset, keys,
          body: message.body.toString('utf8'), group: message.messageGroup || null, send_ts: sendTs,
          delivery_ms: message.deliveryTimestamp ? message.deliveryTimestamp.getTime() : null });
      } catch (e) {
        failed++;
        emit('error', { i, ...errFields(e) });
      }
    }
  } finally {
    await shutdown(producer);
  }
  emit('done', { failed });
  return failed ? 1 : 0;
}

async function txProduce(client, args) {
  const { Producer } = client.rmq;
  const { TransactionResolution } = client.definition;
  const resolutions = { commit: TransactionResolution.COMMIT, rollback: TransactionResolution.ROLLBACK, unknown: null };
  let checked = 0;
  let settled = 0;
  // The client logs each check-back it ended (src/producer/Producer.ts, onRecoverOrphanedTransactionCommand).
  const onLogLine = line => {
    if (line.startsWith('Recover orphaned transaction message success')) {
      settled++;
      emit('settled', { line });
    }
  };
  const checker = {
    async check(m) {
      checked++;
      emit('checked', { message_id: m.messageId, body: m.body.toString('utf8'), topic: m.topic,
        answer: args['check-answer'] });
      return resolutions[args['check-answer']];
    },
  };
  const producer = new Producer({ ...baseOptions(args, onLogLine), topics: [ args.topic ], checker });
  try {
    await producer.startup();
  } catch (e) {
    emit('error', { fatal: true, stage: 'startup', ...errFields(e) });
    return 1;
  }
  emit('started', { role: 'tx-producer', topic: args.topic, client: `rocketmq-client-nodejs@${client.version}`,
    client_id: producer.clientId });
  let failed = 0;
  let open = 0;
  try {
    for (let i = 0; i < args.count; i++) {
      const message = { topic: args.topic, body: Buffer.from(`tx-${i}`), keys: [ `tx-${i}` ] };
      try {
        const tx = producer.beginTransaction();
        const r = await producer.send(message, tx);
        emit('sent', { i, message_id: r.messageId, transaction_id: r.transactionId, offset: r.offset });
        if (args.end === 'commit') await tx.commit();
        else if (args.end === 'rollback') await tx.rollback();
        else open++;
        emit('ended', { i, message_id: r.messageId, end: args.end });
      } catch (e) {
        failed++;
        emit('error', { i, ...errFields(e) });
      }
    }
    const until = Date.now() + args.linger * 1000;
    const done = () => (args['check-answer'] === 'unknown' ? false : settled >= open);
    while (!stopping && Date.now() < until && !(open && done())) await sleep(100);
  } finally {
    await shutdown(producer);
  }
  emit('done', { failed, checked, settled });
  return failed ? 1 : 0;
}

async function shutdown(c) {
  try {
    await Promise.race([ c.shutdown(), sleep(10000) ]);
  } catch (e) {
    logErr('shutdown failed:', e);
  }
}

// ------------------------------------------------------------------------------------------ consume

function filterExpression(client, args) {
  const { FilterExpression } = client.rmq;
  const { FilterType } = client.definition;
  if (args.sql) return new FilterExpression(args.sql, FilterType.SQL);
  return new FilterExpression(args['tag-expr'] || '*', FilterType.TAG);
}

function view(m, late, receiveTs) {
  return {
    message_id: m.messageId,
    topic: m.topic,
    body: m.body.toString('utf8'),
    tag: m.tag === undefined || m.tag === '' ? null : m.tag,
    keys: [ ...m.keys ].sort(),
    properties: Object.fromEntries([ ...m.properties.entries() ].sort()),
    attempt: m.deliveryAttempt,
    group: m.messageGroup || null,
    offset: m.offset,
    delivery_ms: m.deliveryTimestamp ? m.deliveryTimestamp.getTime() : null,
    born_ms: m.bornTimestamp ? m.bornTimestamp.getTime() : null,
    corrupted: m.corrupted === true,
    late,
    ...(receiveTs === undefined ? {} : { receive_ts: receiveTs }),
  };
}

let stopping = false;
process.on('SIGTERM', () => { stopping = true; });
process.on('SIGINT', () => { stopping = true; });

async function simpleConsume(client, args) {
  const { SimpleConsumer } = client.rmq;
  const consumer = new SimpleConsumer({
    ...baseOptions(args),
    consumerGroup: args.group,
    subscriptions: new Map([ [ args.topic, filterExpression(client, args) ] ]),
    ...(args.await === null ? {} : { awaitDuration: Math.round(args.await * 1000) }),
  });
  try {
    await consumer.startup();
  } catch (e) {
    emit('error', { fatal: true, stage: 'startup', ...errFields(e) });
    return 1;
  }
  emit('started', { role: 'simple-consumer', topic: args.topic, client: `rocketmq-client-nodejs@${client.version}`,
    client_id: consumer.clientId });
  let acked = 0;
  let held = 0;
  let ready = false;
  const deadline = Date.now() + args.timeout * 1000;
  let lingerUntil = null;
  try {
    while (!stopping) {
      const now = Date.now();
      if (lingerUntil === null && acked >= args.count) lingerUntil = now + args.linger * 1000;
      if (lingerUntil !== null ? now >= lingerUntil : now >= deadline) break;
      const late = lingerUntil !== null;
      let messages;
      const receiveTs = Date.now();
      try {
        messages = await consumer.receive(args.batch, Math.round(args.invisible * 1000));
      } catch (e) {
        emit('error', { stage: 'receive', ...errFields(e) });
        await sleep(500);
        continue;
      }
      if (!ready) {
        ready = true;
        emit('ready', { received: messages.length });
      }
      for (const m of messages) {
        emit('received', view(m, late, receiveTs));
        if (!late && held < args['hold-first']) {
          held++;
          if (args.change) {
            const changeTs = Date.now();
            try {
              await consumer.changeInvisibleDuration(m, Math.round(args.change * 1000));
              emit('changed', { message_id: m.messageId, invisible_ms: Math.round(args.change * 1000),
                change_ts: changeTs });
            } catch (e) {
              emit('error', { stage: 'change', message_id: m.messageId, ...errFields(e) });
            }
          }
          continue;
        }
        try {
          await consumer.ack(m);
        } catch (e) {
          emit('error', { stage: 'ack', message_id: m.messageId, ...errFields(e) });
          continue;
        }
        emit('acked', { message_id: m.messageId, late });
        if (!late) acked++;
      }
    }
  } finally {
    await shutdown(consumer);
  }
  if (acked < args.count) emit('timeout', { acked, expected: args.count });
  emit('done', { acked });
  return acked >= args.count ? 0 : 3;
}

async function pushConsume(client, args) {
  const { PushConsumer, ConsumeResult } = client.rmq;
  let acked = 0;
  let failed = 0;
  let lingering = false;
  let bodyFailed = 0;
  const busy = new Map(); // message group -> messages of it in the listener now
  // "ready" once the client has asked for messages (after its QueryAssignment): the client logs each
  // ReceiveMessage it sends (src/consumer/Consumer.ts in the package, "Receiving messages from broker").
  let readyTimer = null;
  const onLogLine = line => {
    if (readyTimer === null && line.startsWith('Receiving messages from broker')) {
      readyTimer = setTimeout(() => emit('ready', {}), 500);
    }
  };
  const consumer = new PushConsumer({
    ...baseOptions(args, onLogLine),
    consumerGroup: args.group,
    subscriptions: new Map([ [ args.topic, filterExpression(client, args) ] ]),
    messageListener: {
      async consume(m) {
        const group = m.messageGroup || '';
        const body = m.body.toString('utf8');
        if (group && busy.get(group)) emit('overlap', { group, body });
        busy.set(group, (busy.get(group) || 0) + 1);
        try {
          emit('received', view(m, lingering));
          if (args.sleep) await sleep(args.sleep * 1000);
          const byBody = args['fail-body'] && body === args['fail-body'] && bodyFailed < args['fail-times'];
          if (!lingering && (failed < args['fail-first'] || byBody)) {
            failed++;
            if (byBody) bodyFailed++;
            emit('failed', { message_id: m.messageId, body });
            return ConsumeResult.FAILURE;
          }
          emit('acked', { message_id: m.messageId, body, group: m.messageGroup || null, late: lingering });
          if (!lingering) acked++;
          return ConsumeResult.SUCCESS;
        } finally {
          busy.set(group, busy.get(group) - 1);
        }
      },
    },
  });
  try {
    await consumer.startup();
  } catch (e) {
    emit('error', { fatal: true, stage: 'startup', ...errFields(e) });
    return 1;
  }
  emit('started', { role: 'push-consumer', topic: args.topic, client: `rocketmq-client-nodejs@${client.version}`,
    client_id: consumer.clientId });
  const deadline = Date.now() + args.timeout * 1000;
  try {
    while (!stopping && acked < args.count && Date.now() < deadline) await sleep(100);
    lingering = true;
    const until = Date.now() + args.linger * 1000;
    while (!stopping && acked >= args.count && Date.now() < until) await sleep(100);
  } finally {
    await shutdown(consumer);
  }
  if (acked < args.count) emit('timeout', { acked, expected: args.count });
  emit('done', { acked });
  return acked >= args.count ? 0 : 3;
}

// ------------------------------------------------------------------------------------------ main

async function main() {
  let parsed;
  try {
    parsed = parse(process.argv.slice(2));
  } catch (e) {
    emit('error', { fatal: true, stage: 'usage', ...errFields(e) });
    return 2;
  }
  const { cmd, args } = parsed;
  let client;
  try {
    client = loadClient();
  } catch (e) {
    emit('error', { fatal: true, stage: 'import', ...errFields(e) });
    return 2;
  }
  // The watchdog: the driver's own timeout plus room for startup and shutdown.
  setTimeout(() => {
    emit('error', { fatal: true, stage: 'watchdog', error: 'driver watchdog: the client hung' });
    process.exit(4);
  }, (args.timeout + (args.linger || 0) + (args.await === null ? 30 : args.await || 0) + 60) * 1000).unref();
  if (cmd === 'produce') return produce(client, args);
  if (cmd === 'tx-produce') return txProduce(client, args);
  if (cmd === 'simple-consume') return simpleConsume(client, args);
  return pushConsume(client, args);
}

process.on('unhandledRejection', e => logErr('unhandled rejection:', e));

main().then(
  code => exit(code),
  e => {
    emit('error', { fatal: true, ...errFields(e) });
    exit(e instanceof UsageError ? 2 : 1);
  },
);
