package io.sievemq.interop5;

import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.apis.ClientException;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.MessageListener;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.MessageView;

/** The consumer commands: simple-consume (SimpleConsumer) and push-consume (PushConsumer). */
final class Consuming {
    private Consuming() {
    }

    /**
     * Receives and acks until {@code --count} acks (then {@code --linger} seconds more), or {@code --timeout}.
     * "ready" is printed once the consumer started: its start waits for the proxy's answer to its settings, which
     * registers the group (a new group's consumption starts there).
     */
    static int simple(Driver5.Args a) throws Exception {
        String topic = a.need("--topic");
        String group = a.need("--group");
        int count = a.i("--count", 1);
        int batch = a.i("--batch", 16);
        Duration invisible = Duration.ofMillis((long) (a.d("--invisible", 15) * 1000));
        int holdFirst = a.i("--hold-first", 0);
        double change = a.d("--change", -1);
        long end = System.nanoTime() + (long) (a.d("--timeout", 60) * 1e9);
        FilterExpression filter = Driver5.filter(a);
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        SimpleConsumer consumer;
        try {
            consumer = provider.newSimpleConsumerBuilder().setClientConfiguration(Driver5.config(a))
                .setConsumerGroup(group).setAwaitDuration(Duration.ofMillis((long) (a.d("--await", 3) * 1000)))
                .setSubscriptionExpressions(Collections.singletonMap(topic, filter)).build();
        } catch (Exception e) {  // a ClientException, or the IllegalStateException of a client that failed to start
            return Producing.startFailed("simple-consumer", e);
        }
        Out.emit("started", "role", "simple-consumer", "topic", topic, "group", group, "filter",
            filter.getExpression(), "filter_type", filter.getFilterExpressionType().name());
        Out.emit("ready");
        int acked = 0;
        int held = 0;
        long lingerEnd = Long.MAX_VALUE;
        try {
            while (System.nanoTime() < Math.min(end, lingerEnd) && !Driver5.stopped()) {
                List<MessageView> got;
                try {
                    got = consumer.receive(batch, invisible);
                } catch (ClientException e) {
                    Map<String, Object> f = Out.errorFields(e);
                    f.put("stage", "receive");
                    Out.emit("error", f);
                    if (Driver5.stopWait(500)) {
                        break;
                    }
                    continue;
                }
                for (MessageView m : got) {
                    Out.emit("received", Out.messageFields(m));
                    String id = m.getMessageId().toString();
                    if (held < holdFirst) {
                        held++;
                        Out.brief("held", m);
                        if (change >= 0) {
                            long asked = System.currentTimeMillis();
                            try {
                                consumer.changeInvisibleDuration(m, Duration.ofMillis((long) (change * 1000)));
                                Out.emit("changed", "message_id", id, "asked_at_ms", asked, "invisible_s", change);
                            } catch (ClientException e) {
                                Map<String, Object> f = Out.errorFields(e);
                                f.put("stage", "change");
                                f.put("message_id", id);
                                Out.emit("error", f);
                            }
                        }
                        continue;
                    }
                    try {
                        consumer.ack(m);
                        acked++;
                        Out.brief("acked", m);
                    } catch (ClientException e) {
                        Map<String, Object> f = Out.errorFields(e);
                        f.put("stage", "ack");
                        f.put("message_id", id);
                        Out.emit("error", f);
                    }
                }
                if (acked >= count && lingerEnd == Long.MAX_VALUE) {
                    lingerEnd = System.nanoTime() + (long) (a.d("--linger", 0) * 1e9);
                }
            }
        } finally {
            Driver5.closeQuietly(consumer, Driver5.stopped() ? 3 : 10);
        }
        if (acked < count) {
            Out.emit("error", "stage", "consume", "error", "acked " + acked + " of " + count + " in time",
                "error_type", "ConsumeTimeout");
            return 3;
        }
        return 0;
    }

    /** A PushConsumer whose listener fails the first {@code --fail-first} deliveries and consumes the rest. */
    static int push(Driver5.Args a) throws Exception {
        String topic = a.need("--topic");
        String group = a.need("--group");
        final int count = a.i("--count", 1);
        final int failFirst = a.i("--fail-first", 0);
        long end = System.nanoTime() + (long) (a.d("--timeout", 60) * 1e9);
        FilterExpression filter = Driver5.filter(a);
        final AtomicInteger deliveries = new AtomicInteger();
        final AtomicInteger consumed = new AtomicInteger();
        MessageListener listener = new MessageListener() {
            @Override
            public ConsumeResult consume(MessageView m) {
                Out.emit("received", Out.messageFields(m));
                if (deliveries.incrementAndGet() <= failFirst) {
                    Out.brief("failed", m);
                    return ConsumeResult.FAILURE;
                }
                consumed.incrementAndGet();
                Out.brief("acked", m);
                return ConsumeResult.SUCCESS;
            }
        };
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        PushConsumer consumer;
        try {
            consumer = provider.newPushConsumerBuilder().setClientConfiguration(Driver5.config(a))
                .setConsumerGroup(group).setConsumptionThreadCount(a.i("--threads", 4))
                .setSubscriptionExpressions(Collections.singletonMap(topic, filter)).setMessageListener(listener)
                .build();
        } catch (Exception e) {  // a ClientException, or the IllegalStateException of a client that failed to start
            return Producing.startFailed("push-consumer", e);
        }
        Out.emit("started", "role", "push-consumer", "topic", topic, "group", group, "filter",
            filter.getExpression(), "filter_type", filter.getFilterExpressionType().name());
        Out.emit("ready");
        try {
            while (consumed.get() < count && System.nanoTime() < end && !Driver5.stopWait(50)) {
                // the listener runs on the client's threads
            }
            if (consumed.get() >= count) {
                Driver5.stopWait(Math.min((long) (a.d("--linger", 0) * 1000), (end - System.nanoTime()) / 1000000));
            }
        } finally {
            // Its close first waits for the receives in flight, long polls of up to the proxy's long-polling time
            // (20 s) plus the request timeout: a few seconds are given to it (it tells the proxy goodbye after).
            Driver5.closeQuietly(consumer, 3);
        }
        if (consumed.get() < count) {
            Out.emit("error", "stage", "consume", "error", "consumed " + consumed.get() + " of " + count
                + " in time", "error_type", "ConsumeTimeout");
            return 3;
        }
        return 0;
    }
}
