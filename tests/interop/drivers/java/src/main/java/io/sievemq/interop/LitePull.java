package io.sievemq.interop;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * The lite-pull command: a DefaultLitePullConsumer that subscribes (--mode subscribe) or takes every queue of the
 * topic (--mode assign, from --seek-offset when given), polls until --expect messages came, and with --commit commits
 * its offsets itself at the end ("committed" a queue).
 */
final class LitePull {
    private LitePull() {
    }

    static int litePull(final Args a) throws Exception {
        Lifecycle.onTerm();
        final Lifecycle.Limits limits = Lifecycle.limits(a, "lite-pull");
        final String topic = a.need("--topic");
        final String mode = a.get("--mode", "subscribe");
        final boolean commit = a.flag("--commit");
        final DefaultLitePullConsumer c = new DefaultLitePullConsumer(null, a.need("--group"), Clients.rpcHook(a));
        final Deliveries st = new Deliveries(a.i("--expect", 0), 0);
        final List<MessageQueue> assigned = new ArrayList<MessageQueue>();
        boolean started = Lifecycle.start(new Lifecycle.Step() {
            @Override
            public void run() throws Exception {
                c.setNamesrvAddr(a.need("--namesrv"));
                c.setAutoCommit(!commit);
                c.setConsumeFromWhere(Clients.fromWhere(a.get("--from", "last")));
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
                    assigned.addAll(assign(c, topic, a.get("--seek-offset", null)));
                } else {
                    throw new IllegalArgumentException("--mode wants subscribe|assign, got " + mode);
                }
            }
        });
        if (!started) {
            return 1;
        }
        List<Integer> qids = new ArrayList<Integer>();
        for (MessageQueue mq : assigned) {
            qids.add(mq.getQueueId());
        }
        Collections.sort(qids);
        Out.emit("started", "role", "lite-pull", "group", a.need("--group"), "topic", topic, "mode", mode, "queues",
            qids, "seek_offset", a.get("--seek-offset", null), "commit", commit);
        int code = Lifecycle.awaitThenLinger(st, limits, new Lifecycle.Tick() {
            @Override
            public void run(long maxMs) {
                for (MessageExt m : c.poll()) {
                    st.handle(m);
                }
            }
        });
        if (code == 3) {
            st.reportTimeout(limits.timeout);
        }
        if (commit && code == 0) {
            commit(c, topic);
        }
        Lifecycle.shutdownQuietly(new Runnable() {
            @Override
            public void run() {
                c.shutdown();
            }
        }, "lite-pull consumer", 8);
        return st.done("lite-pull", code);
    }

    /** Takes every queue of ``topic``, each from ``seekOffset`` when given; returns them. */
    private static Collection<MessageQueue> assign(DefaultLitePullConsumer c, String topic, String seekOffset)
            throws Exception {
        Collection<MessageQueue> mqs = c.fetchMessageQueues(topic);
        c.assign(mqs);
        if (seekOffset != null) {
            for (MessageQueue mq : mqs) {
                seek(c, mq, Long.parseLong(seekOffset));
            }
        }
        return mqs;
    }

    /**
     * ``c.seek(mq, offset)``, tried again (up to 5 times) when it fails to reach the broker: rocketmq-client 5.x's
     * assign() starts its pull tasks at once and seek() cancels them, interrupting a task in the middle of a send;
     * the interrupted write closes the shared connection under the seek's own request (seen in the client's log as
     * InterruptedException under RemotingSendRequestException: the client's race, not a broker's answer). The next
     * try goes out on a new connection.
     */
    private static void seek(DefaultLitePullConsumer c, MessageQueue mq, long offset) throws Exception {
        for (int attempt = 1; ; attempt++) {
            try {
                c.seek(mq, offset);
                return;
            } catch (org.apache.rocketmq.client.exception.MQClientException e) {
                if (attempt >= 5) {
                    throw e;
                }
                Thread.sleep(200);
            }
        }
    }

    /** commitSync, then a "committed" event for each queue of ``topic`` the consumer holds, in queue order. */
    private static void commit(DefaultLitePullConsumer c, String topic) throws Exception {
        c.commitSync();
        List<MessageQueue> held = new ArrayList<MessageQueue>(c.assignment());
        Collections.sort(held);
        for (MessageQueue mq : held) {
            if (mq.getTopic().equals(topic)) {
                Out.emit("committed", "queue_id", mq.getQueueId(), "offset", c.committed(mq));
            }
        }
    }
}
