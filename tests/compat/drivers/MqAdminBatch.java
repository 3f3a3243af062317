/*
 * sievemq compatibility tests: Apache RocketMQ's mqadmin run many times in one JVM (tests/compat/mqadmin.py).
 *
 * Reads one command per line on stdin, either a JSON array of mqadmin's arguments (["topicList", "-n", "host:port"])
 * or an object {"args": [...], "timeoutMs": 30000}. Runs MQAdminStartup.main0(args, null) in a thread of its own
 * with System.out and System.err captured (the command thread and every thread it starts write to that command's
 * buffers), and prints one JSON line per command on the real stdout:
 *   {"out": "...", "err": "...", "exit": null | code, "exception": null | "text", "timeout": false, "ms": 123}
 * "exit" is the status of a System.exit the command called (ServerUtil.parseCmdLine exits on a bad command line or
 * -h): a security manager turns it into an error that ends only that command. Needs -Djava.security.manager=allow
 * on Java 17 and later. Ends at end of input.
 *
 * Commands starting with "@" run RocketMQ's own 4.x Java clients in this JVM, so that the admin commands that ask
 * about clients (consumerConnection, consumerStatus, producerConnection...) see the same clients on both brokers:
 *   ["@push", id, namesrv, group, topic, expression]  a DefaultMQPushConsumer (clustering, from the first offset)
 *                                                      that counts what it consumes
 *   ["@producer", id, namesrv, group, topic]           a DefaultMQProducer that knows topic's route and has sent a
 *                                                      heartbeat to its brokers
 *   ["@consumed", id, count, timeoutMs]                wait until the push consumer has consumed count messages;
 *                                                      prints the number consumed
 *   ["@stop", id]                                      shut the client down
 * The client's instance name is its id.
 */

import com.alibaba.fastjson2.JSON;
import com.alibaba.fastjson2.JSONArray;
import com.alibaba.fastjson2.JSONObject;
import com.alibaba.fastjson2.JSONWriter;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.security.Permission;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.tools.command.MQAdminStartup;

public class MqAdminBatch {

    /** Thrown instead of exiting: an Error, so that main0's catch (Exception) does not swallow it. */
    static final class ExitCalled extends Error {
        final int status;

        ExitCalled(int status) {
            super("System.exit(" + status + ")", null, false, false);
            this.status = status;
        }
    }

    /** The buffers of the command a thread works for (threads a command starts inherit them). */
    static final InheritableThreadLocal<ByteArrayOutputStream[]> CAPTURE = new InheritableThreadLocal<>();

    /** Writes to the current thread's command buffer (index 0: out, 1: err), else to the fallback. */
    static final class Routed extends OutputStream {
        private final int index;
        private final OutputStream fallback;

        Routed(int index, OutputStream fallback) {
            this.index = index;
            this.fallback = fallback;
        }

        private OutputStream target() {
            ByteArrayOutputStream[] bufs = CAPTURE.get();
            return bufs == null ? fallback : bufs[index];
        }

        @Override
        public void write(int b) throws java.io.IOException {
            OutputStream t = target();
            synchronized (t) {
                t.write(b);
            }
        }

        @Override
        public void write(byte[] b, int off, int len) throws java.io.IOException {
            OutputStream t = target();
            synchronized (t) {
                t.write(b, off, len);
            }
        }

        @Override
        public void flush() throws java.io.IOException {
            OutputStream t = target();
            synchronized (t) {
                t.flush();
            }
        }
    }

    private static volatile boolean exitAllowed = false;

    /** The clients started by "@" commands, by id, and what each push consumer consumed. */
    private static final Map<String, Object> CLIENTS = new ConcurrentHashMap<>();
    private static final Map<String, AtomicInteger> CONSUMED = new ConcurrentHashMap<>();

    private static void client(String[] args) throws Exception {
        String op = args[0];
        String id = args[1];
        switch (op) {
            case "@push": {
                DefaultMQPushConsumer c = new DefaultMQPushConsumer(args[3]);
                c.setNamesrvAddr(args[2]);
                c.setInstanceName(id);
                c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
                c.subscribe(args[4], args[5]);
                AtomicInteger n = new AtomicInteger();
                c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                    n.addAndGet(msgs.size());
                    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                });
                c.start();
                CLIENTS.put(id, c);
                CONSUMED.put(id, n);
                System.out.println("started " + id);
                break;
            }
            case "@producer": {
                DefaultMQProducer p = new DefaultMQProducer(args[3]);
                p.setNamesrvAddr(args[2]);
                p.setInstanceName(id);
                p.start();
                CLIENTS.put(id, p);
                p.getDefaultMQProducerImpl().getMqClientFactory().updateTopicRouteInfoFromNameServer(args[4]);
                p.getDefaultMQProducerImpl().getMqClientFactory().sendHeartbeatToAllBrokerWithLock();
                System.out.println("started " + id);
                break;
            }
            case "@consumed": {
                AtomicInteger n = CONSUMED.get(id);
                int want = Integer.parseInt(args[2]);
                long deadline = System.currentTimeMillis() + Long.parseLong(args[3]);
                while (n.get() < want && System.currentTimeMillis() < deadline) {
                    Thread.sleep(20);  // polling for a state (a count the listener raises)
                }
                System.out.println(n.get());
                break;
            }
            case "@stop": {
                Object c = CLIENTS.remove(id);
                if (c instanceof DefaultMQPushConsumer) {
                    ((DefaultMQPushConsumer) c).shutdown();
                } else if (c instanceof DefaultMQProducer) {
                    ((DefaultMQProducer) c).shutdown();
                }
                CONSUMED.remove(id);
                System.out.println("stopped " + id);
                break;
            }
            default:
                throw new IllegalArgumentException("unknown client command " + op);
        }
    }

    @SuppressWarnings("removal")
    private static void trapExit() {
        System.setSecurityManager(new SecurityManager() {
            @Override
            public void checkPermission(Permission perm) {
            }

            @Override
            public void checkPermission(Permission perm, Object context) {
            }

            @Override
            public void checkExit(int status) {
                if (!exitAllowed) {
                    throw new ExitCalled(status);
                }
            }
        });
    }

    /**
     * True when the command thread waits in RocketMQ's ServiceThread.shutdown: its remoting client's event executor
     * polls its queue for up to 3 s before it sees it was stopped, and every command's client shuts down so.
     */
    private static boolean inServiceShutdown(Thread t) {
        for (StackTraceElement e : t.getStackTrace()) {
            if (e.getClassName().equals("org.apache.rocketmq.common.ServiceThread") && e.getMethodName().equals("shutdown")) {
                return true;
            }
        }
        return false;
    }

    /** Wakes every remoting event executor from its poll: a stopped one ends, a running one polls again. */
    private static void nudgeEventExecutors() {
        for (Thread th : Thread.getAllStackTraces().keySet()) {
            if (th.getName().equals("NettyEventExecutor") && th.getState() == Thread.State.TIMED_WAITING) {
                th.interrupt();
            }
        }
    }

    private static List<?> subCommands() {
        try {
            java.lang.reflect.Field f = MQAdminStartup.class.getDeclaredField("SUB_COMMANDS");
            f.setAccessible(true);
            return (List<?>) f.get(null);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    private static String text(ByteArrayOutputStream buf) {
        synchronized (buf) {
            return new String(buf.toByteArray(), StandardCharsets.UTF_8);
        }
    }

    private static Map<String, Object> run(String[] args, long timeoutMs) throws InterruptedException {
        ByteArrayOutputStream[] bufs = {new ByteArrayOutputStream(), new ByteArrayOutputStream()};
        Throwable[] thrown = {null};
        System.clearProperty(MixAll.NAMESRV_ADDR_PROPERTY);
        subCommands().clear();  // main0 adds every command again on each call
        Thread t = new Thread(() -> {
            CAPTURE.set(bufs);
            try {
                if (args.length > 0 && args[0].startsWith("@")) {
                    client(args);
                } else {
                    MQAdminStartup.main0(args, null);
                }
            } catch (Throwable e) {
                thrown[0] = e;
            } finally {
                System.out.flush();
                System.err.flush();
            }
        }, "mqadmin-" + (args.length > 0 ? args[0] : "help"));
        t.setDaemon(true);
        long start = System.nanoTime();
        t.start();
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (t.isAlive() && System.currentTimeMillis() < deadline) {
            t.join(25);
            if (t.isAlive() && inServiceShutdown(t)) {
                nudgeEventExecutors();
            }
        }
        boolean timedOut = t.isAlive();
        if (timedOut) {
            t.interrupt();
        }
        Map<String, Object> res = new LinkedHashMap<>();
        res.put("out", text(bufs[0]));
        res.put("err", text(bufs[1]));
        Throwable e = thrown[0];
        res.put("exit", e instanceof ExitCalled ? Integer.valueOf(((ExitCalled) e).status) : null);
        if (e != null && !(e instanceof ExitCalled)) {
            StringWriter sw = new StringWriter();
            e.printStackTrace(new PrintWriter(sw));
            res.put("exception", sw.toString());
        } else {
            res.put("exception", null);
        }
        res.put("timeout", timedOut);
        res.put("ms", (System.nanoTime() - start) / 1_000_000);
        return res;
    }

    public static void main(String[] argv) throws Exception {
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        System.setOut(new PrintStream(new Routed(0, realErr), true, "UTF-8"));
        System.setErr(new PrintStream(new Routed(1, realErr), true, "UTF-8"));
        trapExit();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            Map<String, Object> res;
            try {
                List<String> args;
                long timeoutMs = 60_000;
                if (line.startsWith("{")) {
                    JSONObject o = JSON.parseObject(line);
                    args = o.getJSONArray("args").toJavaList(String.class);
                    if (o.containsKey("timeoutMs")) {
                        timeoutMs = o.getLongValue("timeoutMs");
                    }
                } else {
                    JSONArray a = JSON.parseArray(line);
                    args = a.toJavaList(String.class);
                }
                res = run(args.toArray(new String[0]), timeoutMs);
            } catch (Exception e) {
                res = new LinkedHashMap<>();
                res.put("out", "");
                res.put("err", "");
                res.put("exit", null);
                res.put("exception", "bad input line: " + e);
                res.put("timeout", false);
                res.put("ms", 0);
            }
            synchronized (realOut) {
                realOut.println(JSON.toJSONString(res, JSONWriter.Feature.WriteMapNullValue));
                realOut.flush();
            }
        }
        exitAllowed = true;
        Runtime.getRuntime().halt(0);  // client threads a command left behind must not keep the JVM alive
    }
}
