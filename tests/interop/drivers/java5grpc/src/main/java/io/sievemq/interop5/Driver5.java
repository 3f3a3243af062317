package io.sievemq.interop5;

import java.io.Closeable;
import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.io.UnsupportedEncodingException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;

/**
 * sievemq's interop driver for Apache RocketMQ's Java 5.x gRPC client (rocketmq-client-java), which talks to a
 * gRPC proxy (apache.rocketmq.v2) at {@code --endpoints}.
 *
 * <p>Prints one JSON object per line on stdout (the client's own output goes to stderr and its log to
 * logs/rocketmq/rocketmq-client.log under the working directory); every event carries {@code ts} (epoch seconds)
 * and {@code ts_ms} (epoch milliseconds) of the moment it was printed. Events: started, ready, sent, ended,
 * checked, received, held, changed, acked, failed, error, done (with {@code exit_code}). Exit codes: 0 ok, 1 a
 * start or send failed, 2 usage error, 3 the consumer did not ack {@code --count} (or an awaited transaction check
 * never came) within {@code --timeout}, 4 watchdog (the client hung).
 */
public final class Driver5 {
    static final String USAGE = String.join("\n",
        "usage: Driver5 COMMAND --endpoints H:P --topic T [options]",
        "  common:         --access-key AK --secret-key SK (StaticSessionCredentialsProvider)",
        "                  --timeout S (whole run, default 60) --request-timeout-ms MS (default 10000)",
        "  produce:        --count N --tag T | --tags A,B (message i: tag i % n) --key-prefix k (key k<i>)",
        "                  --prop K=V (repeatable, {i} replaced) --body TEMPLATE (default m{i})",
        "                  --group G (FIFO: every message in message group G) | --groups G1,G2 (FIFO: message i in",
        "                  G[i % n], body <group>-<i / n>) --delay-ms MS (DELAY: delivery timestamp now + MS)",
        "                  --keep-going (send the rest after a failure)",
        "  transaction:    --count N --plan P1,P2 (cycled; body tx-<i>, property plan): commit, rollback, or open",
        "                  for the check-back, answered check-commit, check-rollback, unknown (--check-answer,",
        "                  default unknown) --linger S (stay S after sending, answering checks; exit 3 when an",
        "                  open check-commit/check-rollback transaction was never checked)",
        "  simple-consume: --group G --tag-expr E | --sql E --count N (acks) --batch N --invisible S --await S",
        "                  --hold-first K (do not ack the first K deliveries) --change S (changeInvisibleDuration",
        "                  of each held one to S seconds) --linger S (keep receiving S after count, acking)",
        "  push-consume:   --group G --tag-expr E | --sql E --count N (successes) --fail-first K (FAILURE for the",
        "                  first K deliveries) --threads N --linger S (keep consuming S after count)");

    private static final Set<String> FLAGS = new HashSet<String>(Arrays.asList("--keep-going"));
    private static final Set<String> OPTIONS = new HashSet<String>(Arrays.asList(
        "--endpoints", "--topic", "--group", "--access-key", "--secret-key", "--timeout", "--request-timeout-ms",
        "--count", "--tag", "--tags", "--key-prefix", "--prop", "--body", "--groups", "--delay-ms", "--plan",
        "--check-answer", "--linger", "--tag-expr", "--sql", "--batch", "--invisible", "--await", "--hold-first",
        "--change", "--fail-first", "--threads"));

    /** Counted down when SIGTERM/SIGINT arrives; the hook then waits (a while) for the main thread's "done". */
    static final CountDownLatch STOP = new CountDownLatch(1);
    static final CountDownLatch FINISHED = new CountDownLatch(1);
    /** The exit code of the outcome "done" reported (the shutdown hook exits with it). */
    static volatile int EXIT_CODE = 0;

    private Driver5() {
    }

    /** The command line: a command, then options with a value and flags. */
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

        List<String> list(String k) {
            List<String> l = new ArrayList<String>();
            for (String s : get(k, "").split(",")) {
                if (!s.trim().isEmpty()) {
                    l.add(s.trim());
                }
            }
            return l;
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

    public static void main(String[] argv) {
        // The client logs to ${rocketmq.log.root}/rocketmq-client.log: the working directory (one per run).
        String cwd = new File(".").getAbsoluteFile().getParentFile().getAbsolutePath();
        System.setProperty("user.home", cwd);
        System.setProperty("rocketmq.log.root", cwd + File.separator + "logs" + File.separator + "rocketmq");
        try {
            Out.init(new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8"));
        } catch (UnsupportedEncodingException e) {
            throw new IllegalStateException(e);
        }
        System.setOut(System.err);  // nothing but JSON lines on the real stdout
        Args a;
        try {
            a = new Args(argv);
            a.need("--endpoints");
            a.need("--topic");
        } catch (IllegalArgumentException e) {
            Out.emit("error", "stage", "usage", "fatal", true, "error", e.getMessage());
            System.err.println(USAGE);
            halt(2);
            return;
        }
        onTerm();
        watchdog(a.d("--timeout", 60) + 30);
        int code;
        try {
            if ("produce".equals(a.command)) {
                code = Producing.produce(a);
            } else if ("transaction".equals(a.command)) {
                code = Producing.transaction(a);
            } else if ("simple-consume".equals(a.command)) {
                code = Consuming.simple(a);
            } else if ("push-consume".equals(a.command)) {
                code = Consuming.push(a);
            } else {
                Out.emit("error", "stage", "usage", "fatal", true, "error", "unknown command " + a.command);
                System.err.println(USAGE);
                code = 2;
            }
        } catch (IllegalArgumentException e) {
            Out.emit("error", "stage", "usage", "fatal", true, "error", String.valueOf(e.getMessage()));
            code = 2;
        } catch (Throwable t) {
            Map<String, Object> f = Out.errorFields(t);
            f.put("stage", a.command);
            f.put("fatal", true);
            Out.emit("error", f);
            t.printStackTrace();
            code = 1;
        }
        Out.emit("done", "exit_code", code);
        EXIT_CODE = code;
        FINISHED.countDown();
        halt(code);
    }

    /** The client configuration of the command line: plain TCP (the client's default is TLS), credentials. */
    static ClientConfiguration config(Args a) {
        ClientConfigurationBuilder b = ClientConfiguration.newBuilder()
            .setEndpoints(a.need("--endpoints"))
            .enableSsl(false)
            .setRequestTimeout(Duration.ofMillis(a.l("--request-timeout-ms", 10000)));
        String ak = a.get("--access-key", null);
        if (ak != null) {
            b.setCredentialProvider(new StaticSessionCredentialsProvider(ak, a.get("--secret-key", "")));
        }
        return b.build();
    }

    /** {@code --sql} (SQL92) or {@code --tag-expr} (TAG, default "*"). */
    static FilterExpression filter(Args a) {
        String sql = a.get("--sql", null);
        if (sql != null) {
            return new FilterExpression(sql, FilterExpressionType.SQL92);
        }
        return new FilterExpression(a.get("--tag-expr", "*"), FilterExpressionType.TAG);
    }

    /** Ends the JVM now (the client's threads are not daemons). */
    static void halt(int code) {
        System.err.flush();
        Runtime.getRuntime().halt(code);
    }

    /** Kills the run (exit 4) if it is still going after {@code seconds}. */
    static void watchdog(final double seconds) {
        Thread t = new Thread(new Runnable() {
            @Override
            public void run() {
                try {
                    Thread.sleep((long) (seconds * 1000));
                } catch (InterruptedException e) {
                    return;
                }
                Out.emit("error", "error", "watchdog: the run did not finish within " + seconds + "s", "fatal", true,
                    "error_type", "WatchdogTimeout");
                Out.emit("done", "exit_code", 4);
                halt(4);
            }
        }, "driver-watchdog");
        t.setDaemon(true);
        t.start();
    }

    static void onTerm() {
        Runtime.getRuntime().addShutdownHook(new Thread(new Runnable() {
            @Override
            public void run() {
                STOP.countDown();
                try {
                    if (FINISHED.await(9, TimeUnit.SECONDS)) {
                        // The run reported its outcome: exit with its code, not the signal's 143 (the JVM would,
                        // should this hook return before the main thread's halt).
                        halt(EXIT_CODE);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }, "driver-term"));
    }

    static boolean stopped() {
        return STOP.getCount() == 0;
    }

    /** Waits up to {@code ms} milliseconds unless a stop came; true when it came. */
    static boolean stopWait(long ms) throws InterruptedException {
        return ms > 0 ? STOP.await(ms, TimeUnit.MILLISECONDS) : stopped();
    }

    /** Closes a client, waiting at most {@code seconds} for it. */
    static void closeQuietly(final Closeable c, double seconds) {
        if (c == null) {
            return;
        }
        Thread t = new Thread(new Runnable() {
            @Override
            public void run() {
                try {
                    c.close();
                } catch (Throwable e) {
                    Out.log("close failed: " + e);
                }
            }
        }, "driver-close");
        t.setDaemon(true);
        t.start();
        try {
            t.join((long) (seconds * 1000));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (t.isAlive()) {
            Out.log("close did not finish within " + seconds + "s");
        }
    }
}
