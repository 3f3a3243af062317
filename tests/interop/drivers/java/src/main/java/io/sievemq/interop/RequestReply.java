package io.sievemq.interop;

import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Request/reply: the request command (DefaultMQProducer.request, a "reply" event each) and the answering side of a
 * consume --reply (a producer that sends MessageUtil.createReplyMessage, a "replied" event each).
 */
final class RequestReply {
    private RequestReply() {
    }

    static int request(Args a) throws Exception {
        final double timeout = a.d("--timeout", 60);
        Lifecycle.watchdog(timeout + 30, "request");
        DefaultMQProducer p = Clients.producer(a, a.need("--group"));
        if (!Lifecycle.start(p)) {
            return 1;
        }
        Out.emit("started", "role", "requester", "group", a.need("--group"), "topic", a.need("--topic"));
        int count = a.i("--count", 1);
        long rt = a.l("--request-timeout-ms", 10000);
        int failed = 0;
        for (int i = 0; i < count; i++) {
            Messages.Built x = Messages.build(a, i);
            long t0 = System.nanoTime();
            try {
                Message reply = p.request(x.msg, rt);
                Map<String, Object> f = new LinkedHashMap<String, Object>(x.info);
                f.put("reply_body", new String(reply.getBody(), StandardCharsets.UTF_8));
                f.put("reply_topic", reply.getTopic());
                f.put("reply_props", new TreeMap<String, String>(reply.getProperties()));
                f.put("elapsed_ms", (System.nanoTime() - t0) / 1000000);
                Out.emit("reply", f);
            } catch (Exception e) {
                failed++;
                Out.error(e, "stage", "request", "i", i, "elapsed_ms", (System.nanoTime() - t0) / 1000000);
            }
        }
        Lifecycle.shutdown(p, "requester");
        return Lifecycle.done(failed > 0 ? 1 : 0, "role", "requester", "failed", failed);
    }

    /** The producer a consume --reply answers with (group GROUP_REPLY; not started). */
    static DefaultMQProducer replier(Args a) {
        return Clients.producer(a, a.need("--group") + "_REPLY");
    }

    /** Answers the request ``m`` with the body "reply-" + its body. */
    static void answer(DefaultMQProducer replier, MessageExt m) throws Exception {
        byte[] body = ("reply-" + new String(m.getBody(), StandardCharsets.UTF_8)).getBytes(StandardCharsets.UTF_8);
        Message reply = MessageUtil.createReplyMessage(m, body);
        SendResult r = replier.send(reply);
        Out.emit("replied", "to", MessageUtil.getReplyToClient(m), "correlation_id", m.getProperty("CORRELATION_ID"),
            "reply_topic", reply.getTopic(), "status", r.getSendStatus().name());
    }
}
