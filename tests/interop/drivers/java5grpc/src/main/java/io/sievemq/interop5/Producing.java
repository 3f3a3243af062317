package io.sievemq.interop5;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.rocketmq.client.apis.ClientException;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionChecker;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/** The producer commands: produce (normal, FIFO, delay) and transaction. */
final class Producing {
    private Producing() {
    }

    /** Normal messages, FIFO ones with {@code --group}/{@code --groups}, delayed ones with {@code --delay-ms}. */
    static int produce(Driver5.Args a) throws Exception {
        String topic = a.need("--topic");
        int count = a.i("--count", 1);
        List<String> tags = a.list("--tags");
        if (a.get("--tag", null) != null) {
            tags.add(a.get("--tag", null));
        }
        List<String> groups = a.list("--groups");
        if (a.get("--group", null) != null) {
            groups.add(a.get("--group", null));
        }
        long delayMs = a.l("--delay-ms", -1);
        if (delayMs >= 0 && !groups.isEmpty()) {
            throw new IllegalArgumentException("a message is FIFO or delayed, not both");
        }
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        Producer producer;
        try {
            producer = provider.newProducerBuilder().setClientConfiguration(Driver5.config(a)).setTopics(topic)
                .build();
        } catch (Exception e) {  // a ClientException, or the IllegalStateException of a client that failed to start
            return startFailed("producer", e);
        }
        Out.emit("started", "role", "producer", "topic", topic);
        int failed = 0;
        int sent = 0;
        try {
            for (int i = 0; i < count && !Driver5.stopped(); i++) {
                String group = groups.isEmpty() ? null : groups.get(i % groups.size());
                String body = groups.size() > 1 ? group + "-" + i / groups.size()
                    : a.get("--body", "m{i}").replace("{i}", String.valueOf(i));
                MessageBuilder b = provider.newMessageBuilder().setTopic(topic)
                    .setBody(body.getBytes(StandardCharsets.UTF_8));
                String tag = tags.isEmpty() ? null : tags.get(i % tags.size());
                if (tag != null) {
                    b.setTag(tag);
                }
                String key = a.get("--key-prefix", null) == null ? null : a.get("--key-prefix", null) + i;
                if (key != null) {
                    b.setKeys(key);
                }
                for (String kv : a.all("--prop")) {
                    int eq = kv.indexOf('=');
                    b.addProperty(kv.substring(0, eq), kv.substring(eq + 1).replace("{i}", String.valueOf(i)));
                }
                if (group != null) {
                    b.setMessageGroup(group);
                }
                Long delivery = null;
                if (delayMs >= 0) {
                    delivery = System.currentTimeMillis() + delayMs;
                    b.setDeliveryTimestamp(delivery);
                }
                Message m = b.build();
                try {
                    SendReceipt r = producer.send(m);
                    sent++;
                    Out.emit("sent", "i", i, "message_id", r.getMessageId().toString(), "body", body, "tag", tag,
                        "keys", key, "group", group, "delivery_ms", delivery);
                } catch (ClientException e) {
                    failed++;
                    Map<String, Object> f = Out.errorFields(e);
                    f.put("stage", "send");
                    f.put("i", i);
                    Out.emit("error", f);
                    if (!a.flag("--keep-going")) {
                        break;
                    }
                }
            }
        } finally {
            Driver5.closeQuietly(producer, Driver5.stopped() ? 3 : 10);
        }
        return failed > 0 || sent < count ? 1 : 0;
    }

    /**
     * Transactional messages, one per transaction (body tx-i, property plan), each ended as {@code --plan} says:
     * commit, rollback, or left open for the broker's check-back, which the TransactionChecker answers by the
     * plan: check-commit, check-rollback, unknown ({@code --check-answer}, default unknown). The producer stays
     * {@code --linger} seconds after sending (or until SIGTERM), answering checks; exit 3 when a check-commit or
     * check-rollback transaction was never checked.
     */
    static int transaction(Driver5.Args a) throws Exception {
        String topic = a.need("--topic");
        int count = a.i("--count", 1);
        List<String> plans = a.list("--plan");
        if (plans.isEmpty()) {
            plans.add("commit");
        }
        for (String p : plans) {
            answerOf(p, TransactionResolution.UNKNOWN);
        }
        final TransactionResolution unknownAnswer = answerOf(a.get("--check-answer", "unknown"), null);
        final Set<String> checked = ConcurrentHashMap.newKeySet();
        TransactionChecker checker = new TransactionChecker() {
            @Override
            public TransactionResolution check(MessageView m) {
                String plan = m.getProperties().get("plan");
                TransactionResolution answer = answerOf(plan == null ? "unknown" : plan, unknownAnswer);
                Out.emit("checked", "message_id", m.getMessageId().toString(), "body", Out.body(m), "plan", plan,
                    "answer", answer.name(), "attempt", m.getDeliveryAttempt());
                checked.add(m.getMessageId().toString());
                return answer;
            }
        };
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        Producer producer;
        try {
            producer = provider.newProducerBuilder().setClientConfiguration(Driver5.config(a)).setTopics(topic)
                .setTransactionChecker(checker).build();
        } catch (Exception e) {  // a ClientException, or the IllegalStateException of a client that failed to start
            return startFailed("producer", e);
        }
        Out.emit("started", "role", "transaction-producer", "topic", topic);
        int failed = 0;
        Set<String> awaited = ConcurrentHashMap.newKeySet();
        try {
            for (int i = 0; i < count && !Driver5.stopped(); i++) {
                String plan = plans.get(i % plans.size());
                String body = "tx-" + i;
                Message m = provider.newMessageBuilder().setTopic(topic).setTag(a.get("--tag", "TX"))
                    .setKeys("tx" + i).addProperty("plan", plan).setBody(body.getBytes(StandardCharsets.UTF_8))
                    .build();
                try {
                    Transaction tx = producer.beginTransaction();
                    SendReceipt r = producer.send(m, tx);
                    String id = r.getMessageId().toString();
                    Out.emit("sent", "i", i, "message_id", id, "body", body, "plan", plan);
                    if ("commit".equals(plan)) {
                        tx.commit();
                    } else if ("rollback".equals(plan)) {
                        tx.rollback();
                    } else if (!"unknown".equals(plan)) {
                        awaited.add(id);
                    }
                    Out.emit("ended", "i", i, "message_id", id, "end", plan);
                } catch (ClientException e) {
                    failed++;
                    Map<String, Object> f = Out.errorFields(e);
                    f.put("stage", "transaction");
                    f.put("i", i);
                    Out.emit("error", f);
                }
            }
            Driver5.stopWait((long) (a.d("--linger", 0) * 1000));
        } finally {
            Driver5.closeQuietly(producer, Driver5.stopped() ? 3 : 10);
        }
        if (failed > 0) {
            return 1;
        }
        if (!checked.containsAll(awaited)) {
            Out.emit("error", "stage", "check", "error", "no check came for " + (awaited.size()
                - countIn(awaited, checked)) + " open transaction(s)", "error_type", "CheckTimeout");
            return 3;
        }
        return 0;
    }

    static int startFailed(String role, Exception e) {
        Map<String, Object> f = Out.errorFields(e);
        f.put("stage", "start");
        f.put("role", role);
        f.put("fatal", true);
        Out.emit("error", f);
        return 1;
    }

    /** The checker's answer for a plan ({@code unknown}: {@code unknown}'s answer, null when it names one). */
    static TransactionResolution answerOf(String plan, TransactionResolution unknown) {
        if ("commit".equals(plan) || "check-commit".equals(plan)) {
            return TransactionResolution.COMMIT;
        } else if ("rollback".equals(plan) || "check-rollback".equals(plan)) {
            return TransactionResolution.ROLLBACK;
        } else if ("unknown".equals(plan)) {
            return unknown == null ? TransactionResolution.UNKNOWN : unknown;
        }
        throw new IllegalArgumentException(
            "a plan is commit, rollback, check-commit, check-rollback or unknown, not " + plan);
    }

    private static int countIn(Set<String> a, Set<String> b) {
        int n = 0;
        for (String s : a) {
            if (b.contains(s)) {
                n++;
            }
        }
        return n;
    }
}
