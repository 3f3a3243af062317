package io.sievemq.interop;

import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.producer.DefaultMQProducer;

/**
 * A run's life, the same for every command: start a client (or report why not), wait for a goal within the run's
 * --timeout and then --linger, shut the client down within a bound, report "done". A watchdog ends a run whose client
 * hangs; SIGTERM/SIGINT (for the commands that listen, {@link #onTerm}) ends the waiting early.
 */
final class Lifecycle {
    /** Counted down when SIGTERM/SIGINT arrives (after {@link #onTerm}). */
    private static final CountDownLatch STOP = new CountDownLatch(1);
    /** Counted down when the run reported "done" (or its start failed): the shutdown hook waits for it. */
    private static final CountDownLatch FINISHED = new CountDownLatch(1);
    /** The exit code of the outcome the run reported (the shutdown hook exits with it). */
    static volatile int EXIT_CODE = 0;

    private Lifecycle() {
    }

    /** A piece of client work that may throw. */
    interface Step {
        void run() throws Exception;
    }

    /** What a run waits for. */
    interface Goal {
        boolean reached();
    }

    /** One turn of a wait, which should return within about ``maxMs`` milliseconds (sooner on a stop). */
    interface Tick {
        void run(long maxMs) throws Exception;
    }

    /** A tick that only waits (and wakes up on a stop). */
    static final Tick PAUSE = new Tick() {
        @Override
        public void run(long maxMs) throws InterruptedException {
            STOP.await(maxMs, TimeUnit.MILLISECONDS);
        }
    };

    /** A waiting run's --timeout (for its goal, default 60 s) and --linger (after it, default 2 s). */
    static final class Limits {
        final double timeout;
        final double linger;

        private Limits(Args a) {
            timeout = a.d("--timeout", 60);
            linger = a.d("--linger", 2);
        }
    }

    /** The run's limits, with a watchdog ({@link #watchdog}) for both and 30 s more. */
    static Limits limits(Args a, String what) {
        Limits l = new Limits(a);
        watchdog(l.timeout + l.linger + 30, what);
        return l;
    }

    /** Kills the run (exit 4) if the client hangs past ``seconds``. */
    static void watchdog(final double seconds, final String what) {
        Thread t = new Thread(new Runnable() {
            @Override
            public void run() {
                try {
                    Thread.sleep((long) (seconds * 1000));
                } catch (InterruptedException e) {
                    return;
                }
                Out.emit("error", "error", "watchdog: " + what + " did not finish within " + seconds + "s", "fatal",
                    true, "error_type", "WatchdogTimeout");
                Out.halt(4);
            }
        }, "driver-watchdog");
        t.setDaemon(true);
        t.start();
    }

    /** Makes SIGTERM/SIGINT a stop: the wait ends, and the JVM waits (a while) for the run to report "done". */
    static void onTerm() {
        Runtime.getRuntime().addShutdownHook(new Thread(new Runnable() {
            @Override
            public void run() {
                STOP.countDown();
                try {
                    if (FINISHED.await(9, TimeUnit.SECONDS)) {
                        // The run reported its outcome: exit with its code, not the signal's 143 (the JVM would,
                        // should this hook return before the main thread's halt).
                        Out.halt(EXIT_CODE);
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

    /**
     * Runs ``step`` (a client's configuration and start); false, after a fatal "error" event of stage "start", when
     * it fails. An IllegalArgumentException (a bad option) goes on to main, which reports a usage error.
     */
    static boolean start(Step step) throws Exception {
        try {
            step.run();
            return true;
        } catch (IllegalArgumentException e) {
            throw e;
        } catch (Exception e) {
            Out.error(e, "stage", "start", "fatal", true);
            EXIT_CODE = 1;
            FINISHED.countDown();
            return false;
        }
    }

    /** Starts a producer (see {@link #start(Step)}). */
    static boolean start(final DefaultMQProducer p) throws Exception {
        return start(new Step() {
            @Override
            public void run() throws Exception {
                p.start();
            }
        });
    }

    /**
     * Runs ``tick`` until ``goal`` is reached, then for the --linger seconds more. 3 when the --timeout passes before
     * the goal; otherwise 0, also when a stop came (which ends either phase).
     */
    static int awaitThenLinger(Goal goal, Limits limits, Tick tick) throws Exception {
        long deadline = System.nanoTime() + (long) (limits.timeout * 1e9);
        while (!goal.reached()) {
            long left = deadline - System.nanoTime();
            if (stopped()) {
                return 0;
            }
            if (left <= 0) {
                return 3;
            }
            tick.run(Math.min(50, millis(left)));
        }
        long end = System.nanoTime() + (long) (limits.linger * 1e9);
        for (long left = end - System.nanoTime(); left > 0 && !stopped(); left = end - System.nanoTime()) {
            tick.run(millis(left));
        }
        return 0;
    }

    private static long millis(long nanos) {
        return (nanos + 999999) / 1000000;
    }

    /** Runs ``r`` (a client's shutdown) for at most ``seconds``, then goes on regardless. */
    static void shutdownQuietly(final Runnable r, final String what, double seconds) {
        Thread t = new Thread(new Runnable() {
            @Override
            public void run() {
                try {
                    r.run();
                } catch (Throwable e) {
                    Out.log(what + " shutdown failed: " + e);
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
            Out.log(what + " shutdown did not finish within " + seconds + "s; exiting anyway");
        }
    }

    /** Shuts a producer down (at most 10 s). */
    static void shutdown(final DefaultMQProducer p, String what) {
        shutdownQuietly(new Runnable() {
            @Override
            public void run() {
                p.shutdown();
            }
        }, what, 10);
    }

    /** Reports "done" with ``fields`` and exit_code, and lets a waiting shutdown hook go; returns ``code``. */
    static int done(int code, Map<String, Object> fields) {
        fields.put("exit_code", code);
        Out.emit("done", fields);
        EXIT_CODE = code;
        FINISHED.countDown();
        return code;
    }

    static int done(int code, Object... kv) {
        return done(code, Out.map(kv));
    }
}
