/*
 * The Java side of bench/bench_rocketmq.py: Apache RocketMQ's own 4.x-protocol Java client (rocketmq-client 5.5.0,
 * DefaultMQProducer and DefaultMQPushConsumer) driving a broker through its name server address. The same code
 * drives Apache RocketMQ's broker and sievemq's.
 *
 * One process serves one command per line on stdin ("single ns=127.0.0.1:9876 topic=T n=50000 ..."), and answers
 * on stdout with JSON lines only: {"event":"ready",...} once at start, {"event":"start",...} when a command's timed
 * part begins (the benchmark reads the brokers' CPU counters then), and one result line per command, with
 * "phase", "messages", "seconds", "rate" and the phase's own figures (latency percentiles, errors with their
 * response codes). Everything else the client prints goes to stderr. "quit" ends it.
 *
 * Compiled by bench/rocketmq/driver.py with javac against the rocketmq-client jars (no build tool).
 */

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongSupplier;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

public final class BenchDriver {
    private static PrintStream out;
    private static final AtomicLong INSTANCES = new AtomicLong();
    /** Stop a phase's senders after this many failed sends (a broken broker would otherwise take minutes). */
    private static final int MAX_ERRORS = 100;
    /** A consume or latency phase fails when nothing arrives for this long. */
    private static final long STALL_NANOS = TimeUnit.SECONDS.toNanos(30);

    private BenchDriver() {
    }

    public static void main(String[] args) throws Exception {
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err); // the client's own console output must not mix with the JSON lines
        Json ready = new Json().put("event", "ready").put("client", MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION))
            .put("java", System.getProperty("java.version"))
            .put("cpus", Runtime.getRuntime().availableProcessors());
        emit(ready);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            String[] words = line.split("\\s+");
            if (words[0].equals("quit")) {
                break;
            }
            Map<String, String> kv = new LinkedHashMap<>();
            for (int i = 1; i < words.length; i++) {
                int eq = words[i].indexOf('=');
                kv.put(words[i].substring(0, eq), words[i].substring(eq + 1));
            }
            Cmd cmd = new Cmd(words[0], kv);
            try {
                switch (cmd.name) {
                    case "single":
                        single(cmd);
                        break;
                    case "batch":
                        batch(cmd);
                        break;
                    case "consume":
                        consume(cmd);
                        break;
                    case "latency":
                        latency(cmd);
                        break;
                    default:
                        throw new IllegalArgumentException("unknown command " + cmd.name);
                }
            } catch (Throwable t) {
                emit(cmd.result().put("failed", true).put("error", describe(t)).put("error_code", codeOf(t)));
            }
        }
        System.exit(0); // the client's executors are not all daemon threads
    }

    /** One command: its name and key=value arguments. */
    private static final class Cmd {
        final String name;
        final Map<String, String> kv;

        Cmd(String name, Map<String, String> kv) {
            this.name = name;
            this.kv = kv;
        }

        String s(String key) {
            String v = kv.get(key);
            if (v == null) {
                throw new IllegalArgumentException(name + ": missing " + key);
            }
            return v;
        }

        int i(String key) {
            return Integer.parseInt(s(key));
        }

        double d(String key) {
            return Double.parseDouble(s(key));
        }

        /** The result line's common head: the phase label (``label`` or the command) and the system. */
        Json result() {
            return new Json().put("phase", kv.getOrDefault("label", name)).put("system", kv.getOrDefault("sys", "?"));
        }

        void started() {
            emit(new Json().put("event", "start").put("phase", kv.getOrDefault("label", name)));
        }
    }

    // ---- produce ---------------------------------------------------------------------------------------------

    private static DefaultMQProducer producer(Cmd c) throws MQClientException {
        DefaultMQProducer p = new DefaultMQProducer("bench_" + c.kv.getOrDefault("label", c.name) + "_producer");
        p.setNamesrvAddr(c.s("ns"));
        // A client instance of its own (a shared MQClientInstance would mix the two systems' name servers).
        p.setInstanceName(c.kv.getOrDefault("sys", "x") + "-" + c.name + "-" + INSTANCES.incrementAndGet());
        p.start();
        return p;
    }

    private static byte[] body(int size) {
        byte[] b = new byte[size];
        String hex = "0123456789abcdef";
        java.util.Random r = new java.util.Random();
        for (int i = 0; i < size; i++) {
            b[i] = (byte) hex.charAt(r.nextInt(16));
        }
        return b;
    }

    private static String tagOf(int i) {
        return i % 10 == 0 ? "TagA" : "TagB";
    }

    /** Failed sends: how many, the first one's description and response code, statuses other than SEND_OK. */
    private static final class Errors {
        final AtomicInteger count = new AtomicInteger();
        volatile String first;
        volatile int firstCode = -1;
        final Map<String, AtomicInteger> statuses = new java.util.concurrent.ConcurrentHashMap<>();

        void add(Throwable t) {
            if (count.getAndIncrement() == 0) {
                first = describe(t);
                firstCode = codeOf(t);
            }
        }

        void status(SendStatus s) {
            statuses.computeIfAbsent(s.name(), k -> new AtomicInteger()).incrementAndGet();
        }

        boolean tooMany() {
            return count.get() >= MAX_ERRORS;
        }

        Json into(Json j, String request) {
            j.put("errors", count.get());
            if (first != null) {
                j.put("error", first).put("error_code", firstCode).put("request", request);
            }
            if (!statuses.isEmpty()) {
                j.put("statuses", statuses.toString());
            }
            return j;
        }
    }

    /** N messages, one synchronous send() each, from ``threads`` threads. */
    private static void single(Cmd c) throws Exception {
        String topic = c.s("topic");
        int n = c.i("n");
        byte[] body = body(c.i("size"));
        DefaultMQProducer p = producer(c);
        try {
            p.fetchPublishMessageQueues(topic); // the route, before the timing
            AtomicInteger next = new AtomicInteger();
            AtomicLong ok = new AtomicLong();
            Errors errs = new Errors();
            c.started();
            long t0 = System.nanoTime();
            runThreads(c.i("threads"), () -> {
                int i;
                while (!errs.tooMany() && (i = next.getAndIncrement()) < n) {
                    try {
                        SendResult r = p.send(new Message(topic, tagOf(i), body));
                        if (r.getSendStatus() == SendStatus.SEND_OK) {
                            ok.incrementAndGet();
                        } else {
                            errs.status(r.getSendStatus());
                        }
                    } catch (Exception e) {
                        errs.add(e);
                    }
                }
            });
            double secs = (System.nanoTime() - t0) / 1e9;
            emit(errs.into(rate(c.result(), ok.get(), secs), "SEND_MESSAGE_V2 (310)"));
        } finally {
            p.shutdown();
        }
    }

    /** N messages in batches of ``batch``, one synchronous send(Collection) each, from ``threads`` threads. */
    private static void batch(Cmd c) throws Exception {
        String topic = c.s("topic");
        int n = c.i("n");
        int size = c.i("batch");
        byte[] body = body(c.i("size"));
        DefaultMQProducer p = producer(c);
        try {
            p.fetchPublishMessageQueues(topic);
            AtomicInteger next = new AtomicInteger();
            AtomicLong ok = new AtomicLong();
            Errors errs = new Errors();
            c.started();
            long t0 = System.nanoTime();
            runThreads(c.i("threads"), () -> {
                int s;
                while (!errs.tooMany() && (s = next.getAndAdd(size)) < n) {
                    List<Message> msgs = new ArrayList<>(size);
                    for (int i = s; i < Math.min(n, s + size); i++) {
                        msgs.add(new Message(topic, tagOf(i), body));
                    }
                    try {
                        SendResult r = p.send(msgs);
                        if (r.getSendStatus() == SendStatus.SEND_OK) {
                            ok.addAndGet(msgs.size());
                        } else {
                            errs.status(r.getSendStatus());
                        }
                    } catch (Exception e) {
                        errs.add(e);
                    }
                }
            });
            double secs = (System.nanoTime() - t0) / 1e9;
            emit(errs.into(rate(c.result(), ok.get(), secs), "SEND_BATCH_MESSAGE (320)"));
        } finally {
            p.shutdown();
        }
    }

    private static void runThreads(int threads, Runnable body) throws InterruptedException {
        Thread[] ts = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            ts[t] = new Thread(body, "bench-" + t);
            ts[t].start();
        }
        for (Thread t : ts) {
            t.join();
        }
    }

    // ---- consume ---------------------------------------------------------------------------------------------

    private static DefaultMQPushConsumer consumer(Cmd c, String group) {
        DefaultMQPushConsumer pc = new DefaultMQPushConsumer(group);
        pc.setNamesrvAddr(c.s("ns"));
        pc.setInstanceName(c.kv.getOrDefault("sys", "x") + "-" + c.name + "-" + INSTANCES.incrementAndGet());
        pc.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        pc.setPullBatchSize(32);
        pc.setConsumeMessageBatchMaxSize(32);
        return pc;
    }

    /** Waits until ``count`` reaches ``target`` (read again each time: failed async sends lower it late); false when
     * it did not move for STALL_NANOS. */
    private static boolean await(AtomicLong count, LongSupplier target, CountDownLatch done)
        throws InterruptedException {
        long seen = -1;
        long since = System.nanoTime();
        while (!done.await(100, TimeUnit.MILLISECONDS)) {
            long now = System.nanoTime();
            long c = count.get();
            if (c >= target.getAsLong()) {
                return true;
            }
            if (c != seen) {
                seen = c;
                since = now;
            } else if (now - since > STALL_NANOS) {
                return false;
            }
        }
        return true;
    }

    /** A new group (CONSUME_FROM_FIRST_OFFSET) reading ``expected`` messages of ``topics``, timed from start(). */
    private static void consume(Cmd c) throws Exception {
        long expected = Long.parseLong(c.s("expected"));
        DefaultMQPushConsumer pc = consumer(c, c.s("group"));
        for (String t : c.s("topics").split(",")) {
            pc.subscribe(t, "*");
        }
        AtomicLong count = new AtomicLong();
        AtomicLong firstNs = new AtomicLong();
        AtomicLong lastNs = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.nanoTime();
            firstNs.compareAndSet(0, now);
            if (count.addAndGet(msgs.size()) >= expected && lastNs.compareAndSet(0, now)) {
                done.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.started();
        long t0 = System.nanoTime();
        try {
            pc.start();
            boolean all = await(count, () -> expected, done);
            long end = all ? lastNs.get() : System.nanoTime();
            Json j = rate(c.result(), count.get(), (end - t0) / 1e9).put("expected", expected)
                .put("first_ms", firstNs.get() == 0 ? -1 : (firstNs.get() - t0) / 1e6);
            if (!all) {
                j.put("failed", true).put("request", "PULL_MESSAGE (11)").put("stall",
                    "received " + count.get() + " of " + expected + " messages, then nothing for "
                        + TimeUnit.NANOSECONDS.toSeconds(STALL_NANOS) + " s (the client's log has the pull errors)");
            }
            emit(j);
        } finally {
            pc.shutdown();
        }
    }

    // ---- latency ---------------------------------------------------------------------------------------------

    /**
     * ``rate`` messages per second for ``seconds``, each an asynchronous send() of its own at its due time (not
     * waiting for earlier answers), stamped with System.nanoTime() in the property ``ts``; a push consumer in this
     * process records receive time minus stamp. Every message counts.
     */
    private static void latency(Cmd c) throws Exception {
        String topic = c.s("topic");
        double rate = c.d("rate");
        int n = (int) Math.round(rate * c.d("seconds"));
        byte[] body = body(c.i("size"));
        long[] lat = new long[n];
        AtomicInteger got = new AtomicInteger();
        AtomicLong received = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        DefaultMQProducer p = producer(c);
        DefaultMQPushConsumer pc = consumer(c, c.s("group"));
        pc.subscribe(topic, "*");
        List<MessageQueue> queues = p.fetchPublishMessageQueues(topic);
        CountDownLatch probes = new CountDownLatch(queues.size());
        AtomicInteger failed = new AtomicInteger();
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.nanoTime();
            for (MessageExt m : msgs) {
                String ts = m.getUserProperty("ts");
                if (ts == null) {
                    probes.countDown();
                    continue;
                }
                int k = got.getAndIncrement();
                if (k < lat.length) {
                    lat[k] = now - Long.parseLong(ts);
                }
            }
            if (received.addAndGet(msgs.size()) >= n + queues.size()) {
                done.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        try {
            pc.start();
            // One probe (no ts) to every queue, until each came back: the consumer owns and long-polls them all.
            for (MessageQueue mq : queues) {
                p.send(new Message(topic, "probe", body), mq);
            }
            if (!probes.await(60, TimeUnit.SECONDS)) {
                throw new IllegalStateException("the latency consumer did not receive its probes within 60 s");
            }
            Errors errs = new Errors();
            c.started();
            long t0 = System.nanoTime();
            double interval = 1e9 / rate;
            for (int i = 0; i < n && !errs.tooMany(); i++) {
                long due = t0 + (long) (i * interval);
                long wait;
                while ((wait = due - System.nanoTime()) > 0) {
                    LockSupport.parkNanos(wait);
                }
                Message m = new Message(topic, tagOf(i), body);
                m.putUserProperty("ts", Long.toString(System.nanoTime()));
                try {
                    p.send(m, new SendCallback() {
                        @Override
                        public void onSuccess(SendResult r) {
                            if (r.getSendStatus() != SendStatus.SEND_OK) {
                                errs.status(r.getSendStatus());
                            }
                        }

                        @Override
                        public void onException(Throwable e) {
                            failed.incrementAndGet();
                            errs.add(e);
                        }
                    });
                } catch (Exception e) {
                    failed.incrementAndGet();
                    errs.add(e);
                }
            }
            double sendSecs = (System.nanoTime() - t0) / 1e9;
            boolean all = await(received, () -> (long) n + queues.size() - failed.get(), done);
            int k = Math.min(got.get(), n);
            long[] s = Arrays.copyOf(lat, k);
            Arrays.sort(s);
            Json j = rate(c.result(), k, sendSecs).put("sent", n).put("samples", k)
                .put("p50_ms", pct(s, 50)).put("p99_ms", pct(s, 99)).put("p999_ms", pct(s, 99.9))
                .put("max_ms", k == 0 ? Double.NaN : s[k - 1] / 1e6).put("over_10ms", over(s, 10_000_000L));
            errs.into(j, "SEND_MESSAGE_V2 (310), async");
            if (!all) {
                j.put("failed", true).put("stall", "received " + k + " of " + (n - failed.get())
                    + " sent messages, then nothing for " + TimeUnit.NANOSECONDS.toSeconds(STALL_NANOS) + " s");
            }
            emit(j);
        } finally {
            p.shutdown();
            pc.shutdown();
        }
    }

    /** Nearest-rank percentile in ms of sorted nanoseconds (bench/system/measure.py's percentile). */
    private static double pct(long[] sorted, double p) {
        if (sorted.length == 0) {
            return Double.NaN;
        }
        int rank = (int) Math.ceil(p / 100.0 * sorted.length) - 1;
        return sorted[Math.min(sorted.length - 1, Math.max(0, rank))] / 1e6;
    }

    private static int over(long[] sorted, long nanos) {
        int n = 0;
        for (long x : sorted) {
            if (x > nanos) {
                n++;
            }
        }
        return n;
    }

    // ---- output ----------------------------------------------------------------------------------------------

    private static Json rate(Json j, long messages, double seconds) {
        return j.put("messages", messages).put("seconds", seconds).put("rate", seconds > 0 ? messages / seconds : 0.0);
    }

    /** A throwable and its causes, with the response code a client exception carries. */
    static String describe(Throwable t) {
        StringBuilder sb = new StringBuilder();
        for (int depth = 0; t != null && depth < 4; depth++, t = t.getCause()) {
            if (depth > 0) {
                sb.append(" <- ");
            }
            sb.append(t.getClass().getName());
            if (t instanceof MQBrokerException) {
                MQBrokerException b = (MQBrokerException) t;
                sb.append(" [code ").append(b.getResponseCode()).append(", broker ").append(b.getBrokerAddr())
                    .append("] ").append(b.getErrorMessage());
            } else {
                sb.append(": ").append(t.getMessage());
            }
        }
        String s = sb.toString();
        return s.length() > 2000 ? s.substring(0, 2000) + "..." : s;
    }

    static int codeOf(Throwable t) {
        for (int depth = 0; t != null && depth < 4; depth++, t = t.getCause()) {
            if (t instanceof MQBrokerException) {
                return ((MQBrokerException) t).getResponseCode();
            }
            if (t instanceof MQClientException && ((MQClientException) t).getResponseCode() != -1) {
                return ((MQClientException) t).getResponseCode();
            }
        }
        return -1;
    }

    private static synchronized void emit(Json j) {
        out.println(j);
        out.flush();
    }

    /** A flat JSON object of strings, numbers and booleans. */
    static final class Json {
        private final Map<String, Object> fields = new LinkedHashMap<>();

        Json put(String key, Object value) {
            fields.put(key, value);
            return this;
        }

        @Override
        public String toString() {
            StringBuilder sb = new StringBuilder("{");
            for (Map.Entry<String, Object> e : fields.entrySet()) {
                if (sb.length() > 1) {
                    sb.append(',');
                }
                quote(sb, e.getKey());
                sb.append(':');
                Object v = e.getValue();
                if (v instanceof Double && (((Double) v).isNaN() || ((Double) v).isInfinite())) {
                    sb.append("null");
                } else if (v instanceof Number || v instanceof Boolean) {
                    sb.append(v);
                } else {
                    quote(sb, String.valueOf(v));
                }
            }
            return sb.append('}').toString();
        }

        private static void quote(StringBuilder sb, String s) {
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char ch = s.charAt(i);
                if (ch == '"' || ch == '\\') {
                    sb.append('\\').append(ch);
                } else if (ch < 0x20) {
                    sb.append(String.format("\\u%04x", (int) ch));
                } else {
                    sb.append(ch);
                }
            }
            sb.append('"');
        }
    }
}
