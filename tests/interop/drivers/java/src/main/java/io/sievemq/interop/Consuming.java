package io.sievemq.interop;

import java.text.SimpleDateFormat;
import java.util.ArrayList;
import java.util.Date;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyContext;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyContext;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.impl.consumer.ProcessQueue;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * The consume command: a push consumer (concurrent or --orderly, clustering or broadcasting) that waits for --expect
 * messages, reports each delivery and the queues its rebalance holds ("assigned"), and with --reply answers requests.
 */
final class Consuming {
    private Consuming() {
    }

    static int consume(final Args a) throws Exception {
        Lifecycle.onTerm();
        final Lifecycle.Limits limits = Lifecycle.limits(a, "consume");
        final String topic = a.need("--topic");
        final Deliveries st = new Deliveries(a.i("--expect", 0), a.i("--reconsume", 0));
        final String model = a.get("--model", "clustering");
        final DefaultMQPushConsumer c = Clients.pushConsumer(a, a.need("--group"), Clients.trace(a));
        final DefaultMQProducer replier = a.flag("--reply") ? RequestReply.replier(a) : null;
        boolean started = Lifecycle.start(new Lifecycle.Step() {
            @Override
            public void run() throws Exception {
                configure(c, a, model);
                if (a.flag("--orderly")) {
                    c.registerMessageListener(orderly(st, replier));
                } else {
                    c.registerMessageListener(concurrently(st, replier, a.i("--retry-delay-level", 0)));
                }
                if (replier != null) {
                    replier.start();
                }
                c.start();
            }
        });
        if (!started) {
            return 1;
        }
        Out.emit("started", "role", "consumer", "group", a.need("--group"), "topic", topic, "expr",
            a.get("--sql", a.get("--expr", "*")), "from_where", a.get("--from", "last"), "model", model,
            "orderly", a.flag("--orderly"), "trace", Clients.trace(a));
        watchAssignment(c, topic);
        int code = Lifecycle.awaitThenLinger(st, limits, Lifecycle.PAUSE);
        if (code == 3) {
            st.reportTimeout(limits.timeout);
        }
        Lifecycle.shutdownQuietly(new Runnable() {
            @Override
            public void run() {
                c.shutdown();
                if (replier != null) {
                    replier.shutdown();
                }
            }
        }, "consumer", 8);
        return st.done("consumer", code);
    }

    /** --instance, --model, --from (and --timestamp), --max-reconsume-times, the subscription (--sql or --expr). */
    private static void configure(DefaultMQPushConsumer c, Args a, String model) throws Exception {
        String instance = a.get("--instance", null);
        if (instance != null) {
            c.setInstanceName(instance);
        }
        Clients.setMessageModel(c, model);
        String from = a.get("--from", "last");
        c.setConsumeFromWhere(Clients.fromWhere(from));
        if ("timestamp".equals(from)) {
            c.setConsumeTimestamp(new SimpleDateFormat("yyyyMMddHHmmss").format(new Date(a.l("--timestamp", 0))));
        }
        if (a.get("--max-reconsume-times", null) != null) {
            c.setMaxReconsumeTimes(a.i("--max-reconsume-times", 16));
        }
        String sql = a.get("--sql", null);
        if (sql != null) {
            c.subscribe(a.need("--topic"), MessageSelector.bySql(sql));
        } else {
            c.subscribe(a.need("--topic"), a.get("--expr", "*"));
        }
    }

    /** A rejected delivery suspends its queue a moment (the orderly consumer redelivers it). */
    private static MessageListenerOrderly orderly(final Deliveries st, final DefaultMQProducer replier) {
        return new MessageListenerOrderly() {
            @Override
            public ConsumeOrderlyStatus consumeMessage(List<MessageExt> msgs, ConsumeOrderlyContext ctx) {
                for (MessageExt m : msgs) {
                    if (!deliver(st, m, replier)) {
                        return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                    }
                }
                return ConsumeOrderlyStatus.SUCCESS;
            }
        };
    }

    /** A rejected delivery is RECONSUME_LATER (at --retry-delay-level when given). */
    private static MessageListenerConcurrently concurrently(final Deliveries st, final DefaultMQProducer replier,
            final int retryDelay) {
        return new MessageListenerConcurrently() {
            @Override
            public ConsumeConcurrentlyStatus consumeMessage(List<MessageExt> msgs, ConsumeConcurrentlyContext ctx) {
                boolean ok = true;
                for (MessageExt m : msgs) {
                    ok &= deliver(st, m, replier);
                }
                if (!ok && retryDelay > 0) {
                    ctx.setDelayLevelWhenNextConsume(retryDelay);
                }
                return ok ? ConsumeConcurrentlyStatus.CONSUME_SUCCESS : ConsumeConcurrentlyStatus.RECONSUME_LATER;
            }
        };
    }

    /** One delivery through ``st``; with a replier, an accepted request is answered. */
    private static boolean deliver(Deliveries st, MessageExt m, DefaultMQProducer replier) {
        try {
            boolean ok = st.handle(m);
            if (ok && replier != null) {
                RequestReply.answer(replier, m);
            }
            return ok;
        } catch (Throwable t) {
            Out.error(t, "stage", "callback");
            return false;
        }
    }

    /** Reports the queues of ``topic`` the consumer's rebalance holds whenever they change. */
    private static void watchAssignment(final DefaultMQPushConsumer c, final String topic) {
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
                        Out.log("assignment probe: " + e);
                    }
                    if (!queues.equals(last)) {
                        last = queues;
                        Out.emit("assigned", "topic", topic, "queues", new ArrayList<Integer>(queues));
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
}
