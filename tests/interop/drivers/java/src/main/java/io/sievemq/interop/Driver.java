package io.sievemq.interop;

import java.io.File;

/**
 * sievemq's interop driver for Apache RocketMQ's Java 4.x remoting client (rocketmq-client 4.9.x and 5.x).
 *
 * <p>Prints one JSON object per line on stdout (the client's own output goes to stderr and its log files under the
 * working directory): started, sent, received, rejected, replied, reply, assigned, checked, executed, committed,
 * error, timeout, done. Exit codes: 0 ok, 1 send/start failure, 2 usage error, 3 consume timeout (or an awaited
 * check that never came), 4 watchdog (the client hung). See tests/interop/clients.py.
 *
 * <p>Commands: produce ({@link Producing}), consume ({@link Consuming}), lite-pull ({@link LitePull}), transaction
 * ({@link Transactions}), request ({@link RequestReply}), stream ({@link Streaming}), warmup ({@link Warmup}); run
 * with no argument for the options.
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
        "  stream:      a send every --interval-ms (50) for --duration S (120) or until SIGTERM, each outcome with ts",
        "               --poll-namesrv-ms MS (pollNameServerInterval; default the client's)",
        "  warmup:      start each client kind against --namesrv (a closed port) and send once: loads the classes",
        "               a class-data-sharing archive keeps (setup_java_clients.sh)");

    private Driver() {
    }

    public static void main(String[] argv) {
        // The client logs to ${user.home}/logs/rocketmqlogs and keeps broadcasting offsets in
        // ${user.home}/.rocketmq_offsets: both go to the working directory (the harness gives each run its own).
        String cwd = new File(".").getAbsoluteFile().getParentFile().getAbsolutePath();
        System.setProperty("user.home", cwd);
        System.setProperty("rocketmq.client.logRoot", cwd + File.separator + "logs" + File.separator + "rocketmqlogs");
        System.setProperty("rocketmq.client.localOffsetStoreDir", cwd + File.separator + ".rocketmq_offsets");
        Out.init();  // nothing but JSON lines on the real stdout
        Args a;
        try {
            a = new Args(argv);
            a.need("--namesrv");
            a.need("--topic");
            a.need("--group");
        } catch (IllegalArgumentException e) {
            usageError(e.getMessage(), true);
            Out.halt(2);
            return;
        }
        int code;
        try {
            code = run(a);
        } catch (IllegalArgumentException e) {
            code = usageError(e.getMessage(), false);
        } catch (Throwable t) {
            Out.error(t, "stage", a.command, "fatal", true);
            t.printStackTrace();
            code = 1;
        }
        Out.halt(code);
    }

    /** Runs the command; its exit code. */
    private static int run(Args a) throws Exception {
        switch (a.command) {
            case "produce":
                return Producing.produce(a);
            case "consume":
                return Consuming.consume(a);
            case "lite-pull":
                return LitePull.litePull(a);
            case "transaction":
                return Transactions.transaction(a);
            case "request":
                return RequestReply.request(a);
            case "stream":
                return Streaming.stream(a);
            case "warmup":
                return Warmup.warmup(a);
            default:
                return usageError("unknown command " + a.command, true);
        }
    }

    /** A fatal "error" event of stage "usage" (and the usage text on stderr when ``withUsage``); returns 2. */
    private static int usageError(String message, boolean withUsage) {
        Out.emit("error", "stage", "usage", "fatal", true, "error", message);
        if (withUsage) {
            System.err.println(USAGE);
        }
        return 2;
    }
}
