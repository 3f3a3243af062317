package io.sievemq.interop;

import java.util.Map;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;

import io.sievemq.interop.Messages.Built;

/**
 * The stream command: one synchronous send every --interval-ms (default 50) for --duration seconds (default 120) or
 * until SIGTERM, whatever each send ends in; "sent" (with the broker's answer) or "error" for each, both with ``ts``
 * (epoch seconds, to the millisecond, when the send came back) and ``took_ms``. --poll-namesrv-ms sets the client's
 * pollNameServerInterval (left alone: the client's default, 30 s); "started" reports the one in force.
 */
final class Streaming {
    private Streaming() {
    }

    static int stream(Args a) throws Exception {
        Lifecycle.onTerm();
        double duration = a.d("--duration", 120);
        long interval = a.l("--interval-ms", 50);
        Lifecycle.watchdog(duration + 30, "stream");
        DefaultMQProducer p = Clients.producer(a, a.need("--group"));
        String poll = a.get("--poll-namesrv-ms", null);
        if (poll != null) {
            p.setPollNameServerInterval(Integer.parseInt(poll));
        }
        if (!Lifecycle.start(p)) {
            return 1;
        }
        Out.emit("started", "role", "producer", "group", a.need("--group"), "topic", a.need("--topic"), "mode",
            "stream", "interval_ms", interval, "poll_namesrv_ms", p.getPollNameServerInterval(),
            "retry_times", p.getRetryTimesWhenSendFailed(), "ts", now());
        int sent = 0;
        int failed = 0;
        long end = System.nanoTime() + (long) (duration * 1e9);
        for (int i = a.i("--start-index", 0); !Lifecycle.stopped() && System.nanoTime() < end; i++) {
            Built x = Messages.build(a, i);
            long t0 = System.nanoTime();
            try {
                SendResult r = p.send(x.msg);
                Map<String, Object> f = Messages.sentFields(x.info, r);
                f.put("took_ms", (System.nanoTime() - t0) / 1000000);
                f.put("ts", now());
                Out.emit("sent", f);
                sent++;
            } catch (Exception e) {
                failed++;
                Out.error(e, "stage", "send", "i", i, "took_ms", (System.nanoTime() - t0) / 1000000, "ts", now());
            }
            Lifecycle.PAUSE.run(interval);
        }
        Lifecycle.shutdown(p, "producer");
        return Lifecycle.done(0, "role", "producer", "sent", sent, "failed", failed);
    }

    private static double now() {
        return System.currentTimeMillis() / 1000.0;
    }
}
