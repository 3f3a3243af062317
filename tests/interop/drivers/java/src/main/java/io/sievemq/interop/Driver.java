package io.sievemq.interop;

import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.io.UnsupportedEncodingException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.text.SimpleDateFormat;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Date;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.client.impl.consumer.ProcessQueue;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * sievemq's interop driver for Apache RocketMQ's Java 4.x remoting client (rocketmq-client 4.9.x and 5.x).
 *
 * <p>Prints one JSON object per line on stdout (the client's own output goes to stderr and its log files under the
 * working directory): started, sent, received, rejected, replied, reply, assigned, checked, executed, committed,
 * error, timeout, done. Exit codes: 0 ok, 1 send/start failure, 2 usage error, 3 consume timeout (or an awaited
 * check that never came), 4 watchdog (the client hung). See tests/interop/clients.py.
 *
 * <p>Commands: produce, consume, lite-pull, transaction, request, warmup (run with no argument for the options).
 */
public final class Driver {
    private static final String USAGE = String.join("\n",
        "usage: Driver COMMAND --namesrv H:P --topic T --group G [options]",
        "  common:      --access-key AK --secret-key SK (AclClientRPCHook) --trace (enableMsgTrace)",
        "               --timeout S (whole run, default 60) --instance NAME",
        "  produce:     --mode sync|async|oneway|batch|selector (several: sync,batch) --count N (per mode)",
        "               --tags A,B --key-prefix k --prop K=V (repeatable, {i} replaced) --batch-size N",
        "               --body TEMPLATE ({i}, and with --shard-keys {key} {seq})",
        "               --shard-keys N (selector: message i goes by key k<i%N>) --delay-level L",
        "               --send-timeout-ms MS --keep-going --start-index I",
        "  consume:     --expr TAGS | --sql SQL92 --expect N --linger S --from first|last|timestamp --timestamp MS",
        "               --model clustering|broadcasting --orderly --reconsume N (RECONSUME_LATER to the first N",
        "               deliveries of each message) --retry-delay-level L --max-reconsume-times N --reply",
        "  lite-pull:   --mode subscribe|assign --expr|--sql --expect N --linger S --from first|last --poll-timeout-ms",
        "               --seek-offset O (assign: every queue) --commit (autoCommit off, commitSync at the end)",
        "  transaction: --count N --plan commit,rollback,unknown (cycled) --unknown-checks K (a check answers",
        "               UNKNOW K times, then --check-answer commit|rollback) --linger S (after every check came)",
        "  request:     --count N --request-timeout-ms MS (DefaultMQProducer.request; a consumer --reply answers)",
        "  warmup:      start each client kind against --namesrv (a closed port) and send once: loads the classes",
        "               a class-data-sharing archive keeps (setup_java_clients.sh)");

    private static final Set<String> FLAGS = new HashSet<String>(Arrays.asList(
        "--trace", "--orderly", "--commit", "--keep-going", "--reply"));
    private static final Set<String> OPTIONS = new HashSet<String>(Arrays.asList(
        "--namesrv", "--topic", "--group", "--access-key", "--secret-key", "--timeout", "--instance", "--mode",
        "--count", "--tags", "--key-prefix", "--prop", "--body", "--batch-size", "--shard-keys", "--delay-level",
        "--send-timeout-ms", "--start-index", "--expr", "--sql", "--expect", "--linger", "--from", "--timestamp",
        "--model", "--reconsume", "--retry-delay-level", "--max-reconsume-times", "--seek-offset", "--plan",
        "--unknown-checks", "--check-answer", "--request-timeout-ms", "--poll-timeout-ms"));

    private static PrintStream out;
    private static final long T0 = System.nanoTime();

    private Driver() {
    }

    // ------------------------------------------------------------------------------------------ output

    /** One JSON line on the real stdout. */
    static synchronized void emit(String event, Map<String, Object> fields) {
        Map<String, Object> obj = new LinkedHashMap<String, Object>();
        obj.put("event", event);
        obj.putAll(fields);
        StringBuilder sb = new StringBuilder();
        json(sb, obj);
        out.print(sb.append('\n').toString());
        out.flush();
    }

    static void emit(String event, Object... kv) {
        emit(event, map(kv));
    }

    static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<String, Object>();
        for (int i = 0; i + 1 < kv.length; i += 2) {
            m.put(String.valueOf(kv[i]), kv[i + 1]);
        }
        return m;
    }

    static void json(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof Boolean || v instanceof Integer || v instanceof Long || v instanceof Short) {
            sb.append(v);
        } else if (v instanceof Number) {
            double d = ((Number) v).doubleValue();
            sb.append(Double.isNaN(d) || Double.isInfinite(d) ? "null" : String.valueOf(d));
        } else if (v instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                str(sb, String.valueOf(e.getKey()));
                sb.append(':');
                json(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof Collection) {
            sb.append('[');
            boolean first = true;
            for (Object o : (Collection<?>) v) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                json(sb, o);
            }
            sb.append(']');
        } else {
            str(sb, String.valueOf(v));
        }
    }

    static void str(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }

    static void log(String msg) {
        System.err.println("[driver " + new SimpleDateFormat("HH:mm:ss.SSS").format(new Date()) + "] " + msg);
    }

    static Map<String, Object> errorFields(Throwable t) {
        Map<String, Object> m = map("error", t.getClass().getSimpleName() + ": " + t.getMessage(),
            "error_type", t.getClass().getSimpleName());
        Throwable c = t;
        while (c != null) {
            if (c instanceof MQBrokerException) {
                m.put("response_code", ((MQBrokerException) c).getResponseCode());
                break;
            }
            if (c instanceof org.apache.rocketmq.client.exception.MQClientException
                && ((org.apache.rocketmq.client.exception.MQClientException) c).getResponseCode() > 0) {
                m.put("response_code", ((org.apache.rocketmq.client.exception.MQClientException) c).getResponseCode());
                break;
            }
            c = c.getCause();
        }
        return m;
    }

    static double elapsed() {
        return Math.round((System.nanoTime() - T0) / 1e6) / 1000.0;
    }

    /** Ends the JVM now (the client's threads are not daemons, and its shutdown hooks are not needed). */
    static void halt(int code) {
        out.flush();
        System.err.flush();
        Runtime.getRuntime().halt(code);
    }

    // -------------------------------------------------------------------------------------------- args

    static final class Args {
        final String command;
        final Map<String, List<String>> values = new HashMap<String, List<String>>();

        Args(String[] argv) {
            if (argv.length == 0) {
                throw new IllegalArgumentException("no command");
            }
            command = argv[0];
            for (int i = 1; i < argv.length; i++) {
                String a = argv[i];
                if (FLAGS.contains(a)) {
                    put(a, "true");
                } else if (OPTIONS.contains(a)) {
                    if (i + 1 >= argv.length) {
                        throw new IllegalArgumentException(a + " wants a value");
                    }
                    put(a, argv[++i]);
                } else {
                    throw new IllegalArgumentException("unknown argument " + a);
                }
            }
        }

        private void put(String k, String v) {
            List<String> l = values.get(k);
            if (l == null) {
                l = new ArrayList<String>();
                values.put(k, l);
            }
            l.add(v);
        }

        String get(String k, String dflt) {
            List<String> l = values.get(k);
            return l == null ? dflt : l.get(l.size() - 1);
        }

        String need(String k) {
            String v = get(k, null);
            if (v == null) {
                throw new IllegalArgumentException(command + " needs " + k);
            }
            return v;
        }

        List<String> all(String k) {
            List<String> l = values.get(k);
            return l == null ? new ArrayList<String>() : l;
        }

        int i(String k, int dflt) {
            return Integer.parseInt(get(k, String.valueOf(dflt)));
        }

        long l(String k, long dflt) {
            return Long.parseLong(get(k, String.valueOf(dflt)));
        }

        double d(String k, double dflt) {
            return Double.parseDouble(get(k, String.valueOf(dflt)));
        }

        boolean flag(String k) {
            return values.containsKey(k);
        }
    }

    // ------------------------------------------------------------------------------------------- main

    public static void main(String[] argv) throws Exception {
        // The client logs to ${user.home}/logs/rocketmqlogs and keeps broadcasting offsets in
        // ${user.home}/.rocketmq_offsets: both go to the working directory (the harness gives each run its own).
        String cwd = new File(".").getAbsoluteFile().getParentFile().getAbsolutePath();
        System.setProperty("user.home", cwd);
        System.setProperty("rocketmq.client.logRoot", cwd + File.separator + "logs" + File.separator + "rocketmqlogs");
        System.setProperty("rocketmq.client.localOffsetStoreDir", cwd + File.separator + ".rocketmq_offsets");
        try {
            out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        } catch (UnsupportedEncodingException e) {
            throw new IllegalStateException(e);
        }
        System.setOut(System.err);  // nothing but JSON lines on the real stdout
        Args a;
        try {
            a = new Args(argv);
            a.need("--namesrv");
            a.need("--topic");
            a.need("--group");
        } catch (IllegalArgumentException e) {
            emit("error", "stage", "usage", "fatal", true, "error", e.getMessage());
            System.err.println(USAGE);
            halt(2);
            return;
        }
        int code;
        try {
            if ("produce".equals(a.command)) {
                code = produce(a);
            } else if ("consume".equals(a.command)) {
                code = consume(a);
            } else if ("lite-pull".equals(a.command)) {
                code = litePull(a);
            } else if ("transaction".equals(a.command)) {
                code = transaction(a);
            } else if ("request".equals(a.command)) {
                code = request(a);
            } else if ("warmup".equals(a.command)) {
                code = warmup(a);
            } else {
                emit("error", "stage", "usage", "fatal", true, "error", "unknown command " + a.command);
                System.err.println(USAGE);
                code = 2;
            }
        } catch (IllegalArgumentException e) {
            emit("error", "stage", "usage", "fatal", true, "error", e.getMessage());
            code = 2;
        } catch (Throwable t) {
            Map<String, Object> f = errorFields(t);
            f.put("stage", a.command);
            f.put("fatal", true);
            emit("error", f);
            t.printStackTrace();
            code = 1;
        }
        halt(code);
    }

    /** Kills the run (exit 4) if the client hangs past the run's limit. */
    static void watchdog(final double seconds, final String what) {
        Thread t = new Thread(new Runnable() {
            @Override
            public void run() {
                try {
                    Thread.sleep((long) (seconds * 1000));
                } catch (InterruptedException e) {
                    return;
                }
                emit("error", "error", "watchdog: " + what + " did not finish within " + seconds + "s", "fatal", true,
                    "error_type", "WatchdogTimeout");
                halt(4);
            }
        }, "driver-watchdog");
        t.setDaemon(true);
        t.start();
    }

    /** Set when SIGTERM/SIGINT arrives; the hook then waits (a while) for the main thread to report "done". */
    static final CountDownLatch STOP = new CountDownLatch(1);
    static final CountDownLatch FINISHED = new CountDownLatch(1);

    static void onTerm() {
        Runtime.getRuntime().addShutdownHook(new Thread(new Runnable() {
            @Override
            public void run() {
                STOP.countDown();
                try {
                    FINISHED.await(9, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }, "driver-term"));
    }

    static boolean stopped() {
        return STOP.getCount() == 0;
    }

    /** Waits up to ``ms`` milliseconds unless a stop came; true when it came. */
    static boolean stopWait(long ms) throws InterruptedException {
        return ms > 0 ? STOP.await(ms, TimeUnit.MILLISECONDS) : stopped();
    }

    static RPCHook hook(Args a) {
        String ak = a.get("--access-key", null);
        return ak == null ? null : new AclClientRPCHook(new SessionCredentials(ak, a.get("--secret-key", "")));
    }

    /** Runs ``r`` (a client's shutdown) for at most ``seconds``. */
    static void shutdownQuietly(final Runnable r, final String what, double seconds) {
        Thread t = new Thread(new Runnable() {
            @Override
            public void run() {
                try {
                    r.run();
                } catch (Throwable e) {
                    log(what + " shutdown failed: " + e);
                }
            }
        }, "driver-shutdown");
        t.setDaemon(true);
        t.start();
        try {
            t.join((long) (seconds * 1000));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (t.isAlive()) {
            log(what + " shutdown did not finish within " + seconds + "s; exiting anyway");
        }
    }

    /** Sets the MessageModel by name (its class moved from common.protocol to remoting.protocol in 5.x). */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static void setMessageModel(Object client, String model) throws Exception {
        for (Method m : client.getClass().getMethods()) {
            if (m.getName().equals("setMessageModel") && m.getParameterTypes().length == 1) {
                Class t = m.getParameterTypes()[0];
                m.invoke(client, Enum.valueOf(t, model.toUpperCase()));
                return;
            }
        }
        throw new IllegalStateException("no setMessageModel on " + client.getClass());
    }

    // ---------------------------------------------------------------------------------------- messages

    static String md5(byte[] b) {
        try {
            byte[] d = MessageDigest.getInstance("MD5").digest(b);
            StringBuilder sb = new StringBuilder();
            for (byte x : d) {
                sb.append(String.format("%02x", x & 0xff));
            }
            return sb.toString();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static final class Built {
        final Message msg;
        final Map<String, Object> info;
        final String shardKey;

        Built(Message msg, Map<String, Object> info, String shardKey) {
            this.msg = msg;
            this.info = info;
            this.shardKey = shardKey;
        }
    }

    static Built build(Args a, int i) {
        String topic = a.need("--topic");
        String[] tags = a.get("--tags", "").isEmpty() ? new String[0] : a.get("--tags", "").split(",");
        int shards = a.i("--shard-keys", 0);
        String key = shards > 0 ? "k" + (i % shards) : "";
        String seq = shards > 0 ? String.valueOf(i / shards) : String.valueOf(i);
        String body = a.get("--body", "body-{i}").replace("{i}", String.valueOf(i)).replace("{key}", key)
            .replace("{seq}", seq);
        Message m = new Message(topic, body.getBytes(StandardCharsets.UTF_8));
        Map<String, Object> info = map("i", i);
        if (tags.length > 0) {
            m.setTags(tags[i % tags.length]);
            info.put("tags", tags[i % tags.length]);
        }
        String prefix = a.get("--key-prefix", "");
        if (!prefix.isEmpty()) {
            m.setKeys(prefix + i);
            info.put("keys", prefix + i);
        }
        Map<String, Object> props = new LinkedHashMap<String, Object>();
        for (String kv : a.all("--prop")) {
            int eq = kv.indexOf('=');
            if (eq < 0) {
                throw new IllegalArgumentException("--prop wants K=V, got " + kv);
            }
            String v = kv.substring(eq + 1).replace("{i}", String.valueOf(i));
            m.putUserProperty(kv.substring(0, eq), v);
            props.put(kv.substring(0, eq), v);
        }
        if (!props.isEmpty()) {
            info.put("props", props);
        }
        int delay = a.i("--delay-level", 0);
        if (delay > 0) {
            m.setDelayTimeLevel(delay);
        }
        if (shards > 0) {
            info.put("shard_key", key);
        }
        info.put("body", body);
        info.put("body_md5", md5(m.getBody()));
        return new Built(m, info, key);
    }

    static Map<String, Object> sentFields(Map<String, Object> info, SendResult r) {
        Map<String, Object> f = new LinkedHashMap<String, Object>(info);
        f.put("msg_id", r.getMsgId());
        f.put("offset_msg_id", r.getOffsetMsgId());
        f.put("status", r.getSendStatus().name());
        f.put("queue_id", r.getMessageQueue() == null ? null : r.getMessageQueue().getQueueId());
        f.put("broker", r.getMessageQueue() == null ? null : r.getMessageQueue().getBrokerName());
        f.put("offset", r.getQueueOffset());
        return f;
    }

    static Map<String, Object> describe(MessageExt m) {
        byte[] body = m.getBody() == null ? new byte[0] : m.getBody();
        Map<String, Object> d = new LinkedHashMap<String, Object>();
        d.put("msg_id", m.getMsgId());
        d.put("offset_msg_id", m instanceof MessageClientExt ? ((MessageClientExt) m).getOffsetMsgId() : m.getMsgId());
        d.put("topic", m.getTopic());
        d.put("tags", m.getTags());
        d.put("keys", m.getKeys());
        d.put("body", new String(body, StandardCharsets.UTF_8));
        d.put("body_len", body.length);
        d.put("body_md5", md5(body));
        d.put("props", new TreeMap<String, String>(m.getProperties()));
        d.put("queue_id", m.getQueueId());
        d.put("queue_offset", m.getQueueOffset());
        d.put("reconsume_times", m.getReconsumeTimes());
        d.put("born_timestamp", m.getBornTimestamp());
        d.put("store_timestamp", m.getStoreTimestamp());
        d.put("broker", m.getBrokerName());
        return d;
    }

    static String uniqKey(Message m) {
        String k = m.getProperty("UNIQ_KEY");
        return k != null ? k : (m instanceof MessageExt ? ((MessageExt) m).getMsgId() : null);
    }

    // --------------------------------------------------------------------------------------- produce

    static DefaultMQProducer newProducer(Args a, String group) {
        DefaultMQProducer p = new DefaultMQProducer(group, hook(a), a.flag("--trace"), null);
        configure(p, a);
        return p;
    }

    static void configure(DefaultMQProducer p, Args a) {
        p.setNamesrvAddr(a.need("--namesrv"));
        p.setSendMsgTimeout(a.i("--send-timeout-ms", 3000));
        String instance = a.get("--instance", null);
        if (instance != null) {
            p.setInstanceName(instance);
        }
    }

    static int produce(final Args a) throws Exception {
        String modes = a.get("--mode", "sync");
        int count = a.i("--count", 1);
        int start = a.i("--start-index", 0);
        watchdog(a.d("--timeout", 60) + 30, "produce");
        DefaultMQProducer p = newProducer(a, a.need("--group"));
        try {
            p.start();
        } catch (Exception e) {
            Map<String, Object> f = errorFields(e);
            f.put("stage", "start");
            f.put("fatal", true);
            emit("error", f);
            return 1;
        }
        emit("started", "role", "producer", "group", a.need("--group"), "topic", a.need("--topic"), "mode", modes,
            "trace", a.flag("--trace"));
        AtomicInteger sent = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        // Several modes (--mode sync,batch): each sends --count messages, the indexes running on.
        for (String mode : modes.split(",")) {
            if (!produceMode(p, a, mode, start, count, sent, failed)) {
                break;
            }
            start += count;
        }
        final DefaultMQProducer fp = p;
        shutdownQuietly(new Runnable() {
            @Override
            public void run() {
                fp.shutdown();
            }
        }, "producer", 10);
        emit("done", "role", "producer", "sent", sent.get(), "failed", failed.get(), "exit_code",
            failed.get() > 0 ? 1 : 0);
        return failed.get() > 0 ? 1 : 0;
    }

    /** Sends messages start..start+count-1 one way; false when one failed and --keep-going is not given. */
    static boolean produceMode(DefaultMQProducer p, Args a, String mode, int start, int count,
            final AtomicInteger sent, final AtomicInteger failed) throws Exception {
        boolean keepGoing = a.flag("--keep-going");
        if ("batch".equals(mode)) {
            int bs = Math.max(1, a.i("--batch-size", 4));
            int b = 0;
            for (int s = start; s < start + count; s += bs, b++) {
                List<Built> chunk = new ArrayList<Built>();
                List<Message> msgs = new ArrayList<Message>();
                for (int i = s; i < Math.min(s + bs, start + count); i++) {
                    Built x = build(a, i);
                    chunk.add(x);
                    msgs.add(x.msg);
                }
                try {
                    SendResult r = p.send(msgs);
                    String[] ids = r.getMsgId() == null ? new String[0] : r.getMsgId().split(",");
                    for (int j = 0; j < chunk.size(); j++) {
                        Map<String, Object> f = sentFields(chunk.get(j).info, r);
                        f.put("mode", mode);
                        f.put("msg_id", ids.length == chunk.size() ? ids[j] : r.getMsgId());
                        f.put("offset", r.getQueueOffset() + j);
                        f.put("batch", b);
                        emit("sent", f);
                        sent.incrementAndGet();
                    }
                } catch (Exception e) {
                    failed.addAndGet(chunk.size());
                    Map<String, Object> f = errorFields(e);
                    f.put("stage", "send_batch");
                    f.put("batch", b);
                    emit("error", f);
                    if (!keepGoing) {
                        return false;
                    }
                }
            }
            return true;
        }
        if ("async".equals(mode)) {
            final CountDownLatch all = new CountDownLatch(count);
            final AtomicInteger before = new AtomicInteger(failed.get());
            for (int i = start; i < start + count; i++) {
                final Built x = build(a, i);
                x.info.put("mode", mode);
                try {
                    p.send(x.msg, new SendCallback() {
                        @Override
                        public void onSuccess(SendResult r) {
                            sent.incrementAndGet();
                            emit("sent", sentFields(x.info, r));
                            all.countDown();
                        }

                        @Override
                        public void onException(Throwable e) {
                            failed.incrementAndGet();
                            Map<String, Object> f = errorFields(e);
                            f.put("stage", "send_async");
                            f.put("i", x.info.get("i"));
                            emit("error", f);
                            all.countDown();
                        }
                    });
                } catch (Exception e) {
                    failed.incrementAndGet();
                    all.countDown();
                    Map<String, Object> f = errorFields(e);
                    f.put("stage", "send_async");
                    f.put("i", x.info.get("i"));
                    emit("error", f);
                }
            }
            if (!all.await((long) (a.d("--timeout", 60) * 1000), TimeUnit.MILLISECONDS)) {
                emit("error", "stage", "send_async", "error", "callbacks missing: " + all.getCount());
                failed.incrementAndGet();
            }
            return keepGoing || failed.get() == before.get();
        }
        MessageQueueSelector byKey = new MessageQueueSelector() {
            @Override
            public MessageQueue select(List<MessageQueue> mqs, Message msg, Object arg) {
                return mqs.get((arg.hashCode() & 0x7fffffff) % mqs.size());
            }
        };
        for (int i = start; i < start + count; i++) {
            Built x = build(a, i);
            x.info.put("mode", mode);
            try {
                if ("sync".equals(mode)) {
                    emit("sent", sentFields(x.info, p.send(x.msg)));
                } else if ("selector".equals(mode)) {
                    emit("sent", sentFields(x.info, p.send(x.msg, byKey, x.shardKey)));
                } else if ("oneway".equals(mode)) {
                    p.sendOneway(x.msg);
                    Map<String, Object> f = new LinkedHashMap<String, Object>(x.info);
                    f.put("msg_id", uniqKey(x.msg));
                    f.put("status", "ONEWAY");
                    emit("sent", f);
                } else {
                    throw new IllegalArgumentException("unknown --mode " + mode);
                }
                sent.incrementAndGet();
            } catch (IllegalArgumentException e) {
                throw e;
            } catch (Exception e) {
                failed.incrementAndGet();
                Map<String, Object> f = errorFields(e);
                f.put("stage", "send");
                f.put("i", i);
                emit("error", f);
                if (!keepGoing) {
                    return false;
                }
            }
        }
        return true;
    }

    // ---------------------------------------------------------------------------------------- consume

    /** What a consumer saw: deliveries per message (by UNIQ_KEY), accepted ones, and when --expect was reached. */
    static final class State {
        final int expect;
        final int reconsume;
        final Map<String, Integer> seen = new HashMap<String, Integer>();
        final Map<String, Integer> accepted = new HashMap<String, Integer>();
        int deliveries;
        final CountDownLatch reached = new CountDownLatch(1);

        State(int expect, int reconsume) {
            this.expect = expect;
            this.reconsume = reconsume;
        }

        /** Reports one delivery; false asks for it again (RECONSUME_LATER). */
        boolean handle(MessageExt m, Map<String, Object> extra) {
            Map<String, Object> d = describe(m);
            if (extra != null) {
                d.putAll(extra);
            }
            String key = uniqKey(m);
            boolean reject;
            boolean dup;
            int unique;
            synchronized (this) {
                deliveries++;
                int n = seen.containsKey(key) ? seen.get(key) + 1 : 1;
                seen.put(key, n);
                reject = n <= reconsume;
                dup = false;
                if (!reject) {
                    int c = accepted.containsKey(key) ? accepted.get(key) + 1 : 1;
                    accepted.put(key, c);
                    dup = c > 1;
                }
                unique = accepted.size();
                d.put("delivery", n);
            }
            if (reject) {
                emit("rejected", d);
                return false;
            }
            d.put("duplicate", dup);
            d.put("elapsed_s", elapsed());
            emit("received", d);
            if (expect > 0 && unique >= expect) {
                reached.countDown();
            }
            return true;
        }

        synchronized Map<String, Object> summary() {
            int dups = 0;
            for (int c : accepted.values()) {
                dups += c - 1;
            }
            return map("deliveries", deliveries, "unique", accepted.size(), "duplicates", dups);
        }
    }

    /** Waits for --expect (exit 3 when it does not come in --timeout), then lingers; a stop ends both. */
    static int awaitConsumed(Args a, State st, double timeout) throws InterruptedException {
        int code = 0;
        long deadline = System.nanoTime() + (long) (timeout * 1e9);
        if (st.expect > 0) {
            while (!stopped() && st.reached.getCount() > 0 && System.nanoTime() < deadline) {
                st.reached.await(50, TimeUnit.MILLISECONDS);
                if (STOP.await(1, TimeUnit.MILLISECONDS)) {
                    break;
                }
            }
            if (st.reached.getCount() > 0 && !stopped()) {
                code = 3;
            }
        }
        if (code == 0) {
            stopWait((long) (a.d("--linger", 2) * 1000));
        }
        return code;
    }

    static ConsumeFromWhere fromWhere(String s) {
        if ("first".equals(s)) {
            return ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET;
        }
        if ("last".equals(s)) {
            return ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET;
        }
        if ("timestamp".equals(s)) {
            return ConsumeFromWhere.CONSUME_FROM_TIMESTAMP;
        }
        throw new IllegalArgumentException("--from wants first|last|timestamp, got " + s);
    }

    /** Reports the queues of ``topic`` the consumer's rebalance holds whenever they change. */
    static void watchAssignment(final DefaultMQPushConsumer c, final String topic) {
        Thread t = new Thread(new Runnable() {
            @Override
            public void run() {
                Set<Integer> last = null;
                while (true) {
                    Set<Integer> queues = new TreeSet<Integer>();
                    try {
                        Map<MessageQueue, ProcessQueue> table =
                            c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable();
                        for (Map.Entry<MessageQueue, ProcessQueue> e : table.entrySet()) {
                            if (e.getKey().getTopic().equals(topic) && !e.getValue().isDropped()) {
                                queues.add(e.getKey().getQueueId());
                            }
                        }
                    } catch (RuntimeException e) {
                        log("assignment probe: " + e);
                    }
                    if (!queues.equals(last)) {
                        last = queues;
                        emit("assigned", "topic", topic, "queues", new ArrayList<Integer>(queues));
                    }
                    try {
                        Thread.sleep(100);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }
        }, "driver-assignment");
        t.setDaemon(true);
        t.start();
    }

    static int consume(final Args a) throws Exception {
        onTerm();
        final double timeout = a.d("--timeout", 60);
        watchdog(timeout + a.d("--linger", 2) + 30, "consume");
        final String topic = a.need("--topic");
        final State st = new State(a.i("--expect", 0), a.i("--reconsume", 0));
        final int retryDelay = a.i("--retry-delay-level", 0);
        final String model = a.get("--model", "clustering");
        final DefaultMQPushConsumer c = new DefaultMQPushConsumer(a.need("--group"), hook(a),
            new AllocateMessageQueueAveragely(), a.flag("--trace"), null);
        final DefaultMQProducer replier = a.flag("--reply") ? newProducer(a, a.need("--group") + "_REPLY") : null;
        try {
            c.setNamesrvAddr(a.need("--namesrv"));
            String instance = a.get("--instance", null);
            if (instance != null) {
                c.setInstanceName(instance);
            }
            setMessageModel(c, model);
            String from = a.get("--from", "last");
            c.setConsumeFromWhere(fromWhere(from));
            if ("timestamp".equals(from)) {
                c.setConsumeTimestamp(new SimpleDateFormat("yyyyMMddHHmmss").format(new Date(a.l("--timestamp", 0))));
            }
            if (a.get("--max-reconsume-times", null) != null) {
                c.setMaxReconsumeTimes(a.i("--max-reconsume-times", 16));
            }
            String sql = a.get("--sql", null);
            if (sql != null) {
                c.subscribe(topic, MessageSelector.bySql(sql));
            } else {
                c.subscribe(topic, a.get("--expr", "*"));
            }
            if (a.flag("--orderly")) {
                c.registerMessageListener(new MessageListenerOrderly() {
                    @Override
                    public ConsumeOrderlyStatus consumeMessage(List<MessageExt> msgs,
                            org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyContext ctx) {
                        for (MessageExt m : msgs) {
                            if (!deliver(st, m, replier)) {
                                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                            }
                        }
                        return ConsumeOrderlyStatus.SUCCESS;
                    }
                });
            } else {
                c.registerMessageListener(new MessageListenerConcurrently() {
                    @Override
                    public ConsumeConcurrentlyStatus consumeMessage(List<MessageExt> msgs,
                            org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyContext ctx) {
                        boolean ok = true;
                        for (MessageExt m : msgs) {
                            ok &= deliver(st, m, replier);
                        }
                        if (!ok && retryDelay > 0) {
                            ctx.setDelayLevelWhenNextConsume(retryDelay);
                        }
                        return ok ? ConsumeConcurrentlyStatus.CONSUME_SUCCESS
                            : ConsumeConcurrentlyStatus.RECONSUME_LATER;
                    }
                });
            }
            if (replier != null) {
                replier.start();
            }
            c.start();
        } catch (IllegalArgumentException e) {
            throw e;
        } catch (Exception e) {
            Map<String, Object> f = errorFields(e);
            f.put("stage", "start");
            f.put("fatal", true);
            emit("error", f);
            FINISHED.countDown();
            return 1;
        }
        emit("started", "role", "consumer", "group", a.need("--group"), "topic", topic, "expr",
            a.get("--sql", a.get("--expr", "*")), "from_where", a.get("--from", "last"), "model", model,
            "orderly", a.flag("--orderly"), "trace", a.flag("--trace"));
        watchAssignment(c, topic);
        int code = awaitConsumed(a, st, timeout);
        if (code == 3) {
            Map<String, Object> f = st.summary();
            f.put("expect", st.expect);
            f.put("timeout", timeout);
            emit("timeout", f);
        }
        shutdownQuietly(new Runnable() {
            @Override
            public void run() {
                c.shutdown();
                if (replier != null) {
                    replier.shutdown();
                }
            }
        }, "consumer", 8);
        Map<String, Object> f = st.summary();
        f.put("role", "consumer");
        f.put("exit_code", code);
        emit("done", f);
        FINISHED.countDown();
        return code;
    }

    /** One delivery through State; with a replier, an accepted request is answered (MessageUtil.createReplyMessage). */
    static boolean deliver(State st, MessageExt m, DefaultMQProducer replier) {
        try {
            boolean ok = st.handle(m, null);
            if (ok && replier != null) {
                byte[] body = ("reply-" + new String(m.getBody(), StandardCharsets.UTF_8)).getBytes(
                    StandardCharsets.UTF_8);
                Message reply = MessageUtil.createReplyMessage(m, body);
                SendResult r = replier.send(reply);
                emit("replied", "to", MessageUtil.getReplyToClient(m), "correlation_id",
                    m.getProperty("CORRELATION_ID"), "reply_topic", reply.getTopic(), "status",
                    r.getSendStatus().name());
            }
            return ok;
        } catch (Throwable t) {
            Map<String, Object> f = errorFields(t);
            f.put("stage", "callback");
            emit("error", f);
            return false;
        }
    }

    // -------------------------------------------------------------------------------------- lite pull

    static int litePull(final Args a) throws Exception {
        onTerm();
        final double timeout = a.d("--timeout", 60);
        watchdog(timeout + a.d("--linger", 2) + 30, "lite-pull");
        final String topic = a.need("--topic");
        String mode = a.get("--mode", "subscribe");
        boolean commit = a.flag("--commit");
        final DefaultLitePullConsumer c = new DefaultLitePullConsumer(null, a.need("--group"), hook(a));
        State st = new State(a.i("--expect", 0), 0);
        Collection<MessageQueue> mqs = null;
        try {
            c.setNamesrvAddr(a.need("--namesrv"));
            c.setAutoCommit(!commit);
            c.setConsumeFromWhere(fromWhere(a.get("--from", "last")));
            c.setPollTimeoutMillis(a.l("--poll-timeout-ms", 500));
            if ("subscribe".equals(mode)) {
                String sql = a.get("--sql", null);
                if (sql != null) {
                    c.subscribe(topic, MessageSelector.bySql(sql));
                } else {
                    c.subscribe(topic, a.get("--expr", "*"));
                }
                c.start();
            } else if ("assign".equals(mode)) {
                c.start();
                mqs = c.fetchMessageQueues(topic);
                c.assign(mqs);
                String seek = a.get("--seek-offset", null);
                if (seek != null) {
                    for (MessageQueue mq : mqs) {
                        c.seek(mq, Long.parseLong(seek));
                    }
                }
            } else {
                throw new IllegalArgumentException("--mode wants subscribe|assign, got " + mode);
            }
        } catch (IllegalArgumentException e) {
            throw e;
        } catch (Exception e) {
            Map<String, Object> f = errorFields(e);
            f.put("stage", "start");
            f.put("fatal", true);
            emit("error", f);
            FINISHED.countDown();
            return 1;
        }
        List<Integer> qids = new ArrayList<Integer>();
        if (mqs != null) {
            for (MessageQueue mq : mqs) {
                qids.add(mq.getQueueId());
            }
            java.util.Collections.sort(qids);
        }
        emit("started", "role", "lite-pull", "group", a.need("--group"), "topic", topic, "mode", mode, "queues", qids,
            "seek_offset", a.get("--seek-offset", null), "commit", commit);
        int code = 0;
        long deadline = System.nanoTime() + (long) (timeout * 1e9);
        long lingerEnd = Long.MAX_VALUE;
        while (!stopped()) {
            long now = System.nanoTime();
            if (st.reached.getCount() == 0 || st.expect == 0) {
                if (lingerEnd == Long.MAX_VALUE) {
                    lingerEnd = now + (long) (a.d("--linger", 2) * 1e9);
                }
                if (now >= lingerEnd) {
                    break;
                }
            } else if (now >= deadline) {
                code = 3;
                break;
            }
            for (MessageExt m : c.poll()) {
                st.handle(m, null);
            }
        }
        if (code == 3) {
            Map<String, Object> f = st.summary();
            f.put("expect", st.expect);
            f.put("timeout", timeout);
            emit("timeout", f);
        }
        if (commit && code == 0) {
            c.commitSync();
            Set<MessageQueue> held = c.assignment();
            List<MessageQueue> sorted = new ArrayList<MessageQueue>(held);
            java.util.Collections.sort(sorted);
            for (MessageQueue mq : sorted) {
                if (mq.getTopic().equals(topic)) {
                    emit("committed", "queue_id", mq.getQueueId(), "offset", c.committed(mq));
                }
            }
        }
        shutdownQuietly(new Runnable() {
            @Override
            public void run() {
                c.shutdown();
            }
        }, "lite-pull consumer", 8);
        Map<String, Object> f = st.summary();
        f.put("role", "lite-pull");
        f.put("exit_code", code);
        emit("done", f);
        FINISHED.countDown();
        return code;
    }

    // ------------------------------------------------------------------------------------ transaction

    static int transaction(final Args a) throws Exception {
        final double timeout = a.d("--timeout", 60);
        watchdog(timeout + a.d("--linger", 2) + 30, "transaction");
        final String[] plans = a.get("--plan", "commit,rollback,unknown").split(",");
        final int unknownChecks = a.i("--unknown-checks", 0);
        final String answer = a.get("--check-answer", "commit");
        final Map<String, AtomicInteger> checks = new ConcurrentHashMap<String, AtomicInteger>();
        final Set<String> settled = java.util.Collections.newSetFromMap(new ConcurrentHashMap<String, Boolean>());
        TransactionMQProducer p = new TransactionMQProducer(null, a.need("--group"), hook(a), a.flag("--trace"), null);
        configure(p, a);
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                String plan = msg.getUserProperty("plan");
                LocalTransactionState s = "commit".equals(plan) ? LocalTransactionState.COMMIT_MESSAGE
                    : "rollback".equals(plan) ? LocalTransactionState.ROLLBACK_MESSAGE : LocalTransactionState.UNKNOW;
                emit("executed", "keys", msg.getKeys(), "plan", plan, "answer", s.name(), "transaction_id",
                    msg.getTransactionId());
                return s;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                String key = msg.getKeys();
                AtomicInteger n = checks.get(key);
                if (n == null) {
                    checks.putIfAbsent(key, new AtomicInteger());
                    n = checks.get(key);
                }
                int times = n.incrementAndGet();
                LocalTransactionState s = times <= unknownChecks ? LocalTransactionState.UNKNOW
                    : "rollback".equals(answer) ? LocalTransactionState.ROLLBACK_MESSAGE
                    : LocalTransactionState.COMMIT_MESSAGE;
                Map<String, Object> d = describe(msg);
                d.put("times", times);
                d.put("answer", s.name());
                d.put("transaction_id", msg.getTransactionId());
                d.put("elapsed_s", elapsed());
                emit("checked", d);
                if (s != LocalTransactionState.UNKNOW) {
                    settled.add(key);
                }
                return s;
            }
        });
        try {
            p.start();
        } catch (Exception e) {
            Map<String, Object> f = errorFields(e);
            f.put("stage", "start");
            f.put("fatal", true);
            emit("error", f);
            return 1;
        }
        emit("started", "role", "transaction-producer", "group", a.need("--group"), "topic", a.need("--topic"),
            "trace", a.flag("--trace"));
        int count = a.i("--count", 1);
        int failed = 0;
        Set<String> unknown = new HashSet<String>();
        for (int i = 0; i < count; i++) {
            String plan = plans[i % plans.length];
            Built x = build(a, i);
            x.msg.putUserProperty("plan", plan);
            if (x.msg.getKeys() == null) {
                x.msg.setKeys("tx" + i);
                x.info.put("keys", "tx" + i);
            }
            try {
                TransactionSendResult r = p.sendMessageInTransaction(x.msg, null);
                Map<String, Object> f = sentFields(x.info, r);
                f.put("plan", plan);
                f.put("local_state", r.getLocalTransactionState().name());
                f.put("transaction_id", r.getTransactionId());
                emit("sent", f);
                if ("unknown".equals(plan)) {
                    unknown.add(x.msg.getKeys());
                }
            } catch (Exception e) {
                failed++;
                Map<String, Object> f = errorFields(e);
                f.put("stage", "send");
                f.put("i", i);
                emit("error", f);
            }
        }
        int code = failed > 0 ? 1 : 0;
        long deadline = System.nanoTime() + (long) (timeout * 1e9);
        while (code == 0 && !settled.containsAll(unknown)) {
            if (System.nanoTime() > deadline) {
                Set<String> missing = new TreeSet<String>(unknown);
                missing.removeAll(settled);
                emit("timeout", "waiting_for_checks", new ArrayList<String>(missing));
                code = 3;
                break;
            }
            Thread.sleep(50);
        }
        if (code == 0) {
            Thread.sleep((long) (a.d("--linger", 2) * 1000));
        }
        final TransactionMQProducer fp = p;
        shutdownQuietly(new Runnable() {
            @Override
            public void run() {
                fp.shutdown();
            }
        }, "transaction producer", 10);
        Map<String, Object> counts = new TreeMap<String, Object>();
        for (Map.Entry<String, AtomicInteger> e : checks.entrySet()) {
            counts.put(e.getKey(), e.getValue().get());
        }
        emit("done", "role", "transaction-producer", "failed", failed, "checks", counts, "exit_code", code);
        return code;
    }

    // ----------------------------------------------------------------------------------------- warmup

    /** Starts every client kind once against an address where nothing listens, sending and subscribing on the way,
     * so that a class-data-sharing archive made from this run holds the classes a real run loads. */
    static int warmup(final Args a) throws Exception {
        final String topic = a.need("--topic");
        final String group = a.need("--group");
        final DefaultMQProducer p = newProducer(a, group);
        p.setSendMsgTimeout(300);
        p.setRetryTimesWhenSendFailed(0);
        quietly("producer", new Step() {
            @Override
            public void run() throws Exception {
                p.start();
                p.send(build(a, 0).msg);
            }
        });
        quietly("push consumer", new Step() {
            @Override
            public void run() throws Exception {
                DefaultMQPushConsumer c = new DefaultMQPushConsumer(group, hook(a),
                    new AllocateMessageQueueAveragely(), false, null);
                c.setNamesrvAddr(a.need("--namesrv"));
                c.subscribe(topic, MessageSelector.bySql("a > 1"));
                c.registerMessageListener(new MessageListenerConcurrently() {
                    @Override
                    public ConsumeConcurrentlyStatus consumeMessage(List<MessageExt> msgs,
                            org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyContext ctx) {
                        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                    }
                });
                c.start();
            }
        });
        quietly("lite pull consumer", new Step() {
            @Override
            public void run() throws Exception {
                DefaultLitePullConsumer l = new DefaultLitePullConsumer(null, group + "_L", hook(a));
                l.setNamesrvAddr(a.need("--namesrv"));
                l.subscribe(topic, "*");
                l.start();
                l.poll(10);
            }
        });
        quietly("transaction producer", new Step() {
            @Override
            public void run() throws Exception {
                TransactionMQProducer t = new TransactionMQProducer(null, group + "_T", hook(a), false, null);
                t.setNamesrvAddr(a.need("--namesrv"));
                t.start();
            }
        });
        emit("done", "role", "warmup", "exit_code", 0);
        return 0;
    }

    interface Step {
        void run() throws Exception;
    }

    static void quietly(String what, Step step) {
        try {
            step.run();
        } catch (Exception e) {
            log("warmup " + what + ": " + e);
        }
    }

    // ---------------------------------------------------------------------------------------- request

    static int request(final Args a) throws Exception {
        final double timeout = a.d("--timeout", 60);
        watchdog(timeout + 30, "request");
        DefaultMQProducer p = newProducer(a, a.need("--group"));
        try {
            p.start();
        } catch (Exception e) {
            Map<String, Object> f = errorFields(e);
            f.put("stage", "start");
            f.put("fatal", true);
            emit("error", f);
            return 1;
        }
        emit("started", "role", "requester", "group", a.need("--group"), "topic", a.need("--topic"));
        int count = a.i("--count", 1);
        long rt = a.l("--request-timeout-ms", 10000);
        int failed = 0;
        for (int i = 0; i < count; i++) {
            Built x = build(a, i);
            long t0 = System.nanoTime();
            try {
                Message reply = p.request(x.msg, rt);
                Map<String, Object> f = new LinkedHashMap<String, Object>(x.info);
                f.put("reply_body", new String(reply.getBody(), StandardCharsets.UTF_8));
                f.put("reply_topic", reply.getTopic());
                f.put("reply_props", new TreeMap<String, String>(reply.getProperties()));
                f.put("elapsed_ms", (System.nanoTime() - t0) / 1000000);
                emit("reply", f);
            } catch (Exception e) {
                failed++;
                Map<String, Object> f = errorFields(e);
                f.put("stage", "request");
                f.put("i", i);
                f.put("elapsed_ms", (System.nanoTime() - t0) / 1000000);
                emit("error", f);
            }
        }
        final DefaultMQProducer fp = p;
        shutdownQuietly(new Runnable() {
            @Override
            public void run() {
                fp.shutdown();
            }
        }, "requester", 10);
        emit("done", "role", "requester", "failed", failed, "exit_code", failed > 0 ? 1 : 0);
        return failed > 0 ? 1 : 0;
    }
}
