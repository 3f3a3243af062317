package io.sievemq.interop;

import java.util.ArrayList;
import java.util.List;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;

import io.sievemq.interop.Messages.Built;

/** The produce command: --count messages in each --mode (sync, async, oneway, batch, selector), "sent" each. */
final class Producing {
    /** --mode selector: a message goes to the queue its --shard-keys key hashes to. */
    private static final MessageQueueSelector BY_KEY = new MessageQueueSelector() {
        @Override
        public MessageQueue select(List<MessageQueue> mqs, Message msg, Object arg) {
            return mqs.get((arg.hashCode() & 0x7fffffff) % mqs.size());
        }
    };

    private final Args a;
    private final DefaultMQProducer p;
    private final boolean keepGoing;
    private final AtomicInteger sent = new AtomicInteger();
    private final AtomicInteger failed = new AtomicInteger();

    private Producing(Args a, DefaultMQProducer p) {
        this.a = a;
        this.p = p;
        this.keepGoing = a.flag("--keep-going");
    }

    static int produce(Args a) throws Exception {
        String modes = a.get("--mode", "sync");
        int count = a.i("--count", 1);
        int start = a.i("--start-index", 0);
        Lifecycle.watchdog(a.d("--timeout", 60) + 30, "produce");
        DefaultMQProducer p = Clients.producer(a, a.need("--group"));
        if (!Lifecycle.start(p)) {
            return 1;
        }
        Out.emit("started", "role", "producer", "group", a.need("--group"), "topic", a.need("--topic"), "mode", modes,
            "trace", Clients.trace(a));
        Producing run = new Producing(a, p);
        // Several modes (--mode sync,batch): each sends --count messages, the indexes running on.
        for (String mode : modes.split(",")) {
            if (!run.send(mode, start, count)) {
                break;
            }
            start += count;
        }
        Lifecycle.shutdown(p, "producer");
        int failed = run.failed.get();
        return Lifecycle.done(failed > 0 ? 1 : 0, "role", "producer", "sent", run.sent.get(), "failed", failed);
    }

    /** Sends messages start..start+count-1 one way; false when one failed and --keep-going is not given. */
    private boolean send(String mode, int start, int count) throws Exception {
        if ("batch".equals(mode)) {
            return sendBatches(mode, start, count);
        }
        if ("async".equals(mode)) {
            return sendAsync(mode, start, count);
        }
        for (int i = start; i < start + count; i++) {
            Built x = Messages.build(a, i);
            x.info.put("mode", mode);
            try {
                if ("sync".equals(mode)) {
                    Out.emit("sent", Messages.sentFields(x.info, p.send(x.msg)));
                } else if ("selector".equals(mode)) {
                    Out.emit("sent", Messages.sentFields(x.info, p.send(x.msg, BY_KEY, x.shardKey)));
                } else if ("oneway".equals(mode)) {
                    p.sendOneway(x.msg);
                    Map<String, Object> f = new LinkedHashMap<String, Object>(x.info);
                    f.put("msg_id", Messages.uniqKey(x.msg));
                    f.put("status", "ONEWAY");
                    Out.emit("sent", f);
                } else {
                    throw new IllegalArgumentException("unknown --mode " + mode);
                }
                sent.incrementAndGet();
            } catch (IllegalArgumentException e) {
                throw e;
            } catch (Exception e) {
                failed.incrementAndGet();
                Out.error(e, "stage", "send", "i", i);
                if (!keepGoing) {
                    return false;
                }
            }
        }
        return true;
    }

    /** --mode batch: --batch-size messages a send; a "sent" for each, with its offset in the batch's run. */
    private boolean sendBatches(String mode, int start, int count) {
        int bs = Math.max(1, a.i("--batch-size", 4));
        int b = 0;
        for (int s = start; s < start + count; s += bs, b++) {
            List<Built> chunk = new ArrayList<Built>();
            List<Message> msgs = new ArrayList<Message>();
            for (int i = s; i < Math.min(s + bs, start + count); i++) {
                Built x = Messages.build(a, i);
                chunk.add(x);
                msgs.add(x.msg);
            }
            try {
                SendResult r = p.send(msgs);
                String[] ids = r.getMsgId() == null ? new String[0] : r.getMsgId().split(",");
                for (int j = 0; j < chunk.size(); j++) {
                    Map<String, Object> f = Messages.sentFields(chunk.get(j).info, r);
                    f.put("mode", mode);
                    f.put("msg_id", ids.length == chunk.size() ? ids[j] : r.getMsgId());
                    f.put("offset", r.getQueueOffset() + j);
                    f.put("batch", b);
                    Out.emit("sent", f);
                    sent.incrementAndGet();
                }
            } catch (Exception e) {
                failed.addAndGet(chunk.size());
                Out.error(e, "stage", "send_batch", "batch", b);
                if (!keepGoing) {
                    return false;
                }
            }
        }
        return true;
    }

    /** --mode async: every send at once, then up to --timeout for their callbacks. */
    private boolean sendAsync(String mode, int start, int count) throws InterruptedException {
        CountDownLatch all = new CountDownLatch(count);
        int before = failed.get();
        for (int i = start; i < start + count; i++) {
            Built x = Messages.build(a, i);
            x.info.put("mode", mode);
            Callback cb = new Callback(x, all);
            try {
                p.send(x.msg, cb);
            } catch (Exception e) {
                cb.onException(e);
            }
        }
        if (!all.await((long) (a.d("--timeout", 60) * 1000), TimeUnit.MILLISECONDS)) {
            Out.emit("error", "stage", "send_async", "error", "callbacks missing: " + all.getCount());
            failed.incrementAndGet();
        }
        return keepGoing || failed.get() == before;
    }

    /** One async send's outcome: "sent" or "error", then the latch. */
    private final class Callback implements SendCallback {
        private final Built x;
        private final CountDownLatch all;

        Callback(Built x, CountDownLatch all) {
            this.x = x;
            this.all = all;
        }

        @Override
        public void onSuccess(SendResult r) {
            sent.incrementAndGet();
            Out.emit("sent", Messages.sentFields(x.info, r));
            all.countDown();
        }

        @Override
        public void onException(Throwable e) {
            failed.incrementAndGet();
            Out.error(e, "stage", "send_async", "i", x.info.get("i"));
            all.countDown();
        }
    }
}
