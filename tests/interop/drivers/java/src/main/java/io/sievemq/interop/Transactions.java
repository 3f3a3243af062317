package io.sievemq.interop;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

import io.sievemq.interop.Messages.Built;

/**
 * The transaction command: a TransactionMQProducer sends --count half messages, each with a local transaction that
 * answers its --plan ("executed"); the broker's check-backs ("checked") answer UNKNOW --unknown-checks times, then
 * --check-answer. The run waits until every "unknown" message had a final check-back, then lingers.
 */
final class Transactions implements TransactionListener {
    private final int unknownChecks;
    private final String answer;
    /** Check-backs per message key. */
    private final Map<String, AtomicInteger> checks = new ConcurrentHashMap<String, AtomicInteger>();
    /** The keys of the messages a check-back committed or rolled back. */
    private final Set<String> settled = Collections.newSetFromMap(new ConcurrentHashMap<String, Boolean>());

    private Transactions(Args a) {
        unknownChecks = a.i("--unknown-checks", 0);
        answer = a.get("--check-answer", "commit");
    }

    static int transaction(Args a) throws Exception {
        final Lifecycle.Limits limits = Lifecycle.limits(a, "transaction");
        String[] plans = a.get("--plan", "commit,rollback,unknown").split(",");
        final Transactions tx = new Transactions(a);
        TransactionMQProducer p = Clients.configure(
            new TransactionMQProducer(null, a.need("--group"), Clients.rpcHook(a), Clients.trace(a), null), a);
        p.setTransactionListener(tx);
        if (!Lifecycle.start(p)) {
            return 1;
        }
        Out.emit("started", "role", "transaction-producer", "group", a.need("--group"), "topic", a.need("--topic"),
            "trace", Clients.trace(a));
        int count = a.i("--count", 1);
        int failed = 0;
        final Set<String> unknown = new HashSet<String>();
        for (int i = 0; i < count; i++) {
            String plan = plans[i % plans.length];
            Built x = Messages.build(a, i);
            x.msg.putUserProperty("plan", plan);
            if (x.msg.getKeys() == null) {
                x.msg.setKeys("tx" + i);
                x.info.put("keys", "tx" + i);
            }
            try {
                TransactionSendResult r = p.sendMessageInTransaction(x.msg, null);
                Map<String, Object> f = Messages.sentFields(x.info, r);
                f.put("plan", plan);
                f.put("local_state", r.getLocalTransactionState().name());
                f.put("transaction_id", r.getTransactionId());
                Out.emit("sent", f);
                if ("unknown".equals(plan)) {
                    unknown.add(x.msg.getKeys());
                }
            } catch (Exception e) {
                failed++;
                Out.error(e, "stage", "send", "i", i);
            }
        }
        int code = failed > 0 ? 1 : Lifecycle.awaitThenLinger(new Lifecycle.Goal() {
            @Override
            public boolean reached() {
                return tx.settled.containsAll(unknown);
            }
        }, limits, Lifecycle.PAUSE);
        if (code == 3) {
            Set<String> missing = new TreeSet<String>(unknown);
            missing.removeAll(tx.settled);
            Out.emit("timeout", "waiting_for_checks", new ArrayList<String>(missing));
        }
        Lifecycle.shutdown(p, "transaction producer");
        Map<String, Object> counts = new TreeMap<String, Object>();
        for (Map.Entry<String, AtomicInteger> e : tx.checks.entrySet()) {
            counts.put(e.getKey(), e.getValue().get());
        }
        return Lifecycle.done(code, "role", "transaction-producer", "failed", failed, "checks", counts);
    }

    /** The local transaction answers the message's plan: commit, rollback, or (any other) UNKNOW. */
    @Override
    public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
        String plan = msg.getUserProperty("plan");
        LocalTransactionState s = "commit".equals(plan) ? LocalTransactionState.COMMIT_MESSAGE
            : "rollback".equals(plan) ? LocalTransactionState.ROLLBACK_MESSAGE : LocalTransactionState.UNKNOW;
        Out.emit("executed", "keys", msg.getKeys(), "plan", plan, "answer", s.name(), "transaction_id",
            msg.getTransactionId());
        return s;
    }

    /** A check-back answers UNKNOW for the first --unknown-checks of a message, then --check-answer. */
    @Override
    public LocalTransactionState checkLocalTransaction(MessageExt msg) {
        String key = msg.getKeys();
        checks.putIfAbsent(key, new AtomicInteger());
        int times = checks.get(key).incrementAndGet();
        LocalTransactionState s = times <= unknownChecks ? LocalTransactionState.UNKNOW
            : "rollback".equals(answer) ? LocalTransactionState.ROLLBACK_MESSAGE
            : LocalTransactionState.COMMIT_MESSAGE;
        Map<String, Object> d = Messages.describe(msg);
        d.put("times", times);
        d.put("answer", s.name());
        d.put("transaction_id", msg.getTransactionId());
        d.put("elapsed_s", Out.elapsed());
        Out.emit("checked", d);
        if (s != LocalTransactionState.UNKNOW) {
            settled.add(key);
        }
        return s;
    }
}

