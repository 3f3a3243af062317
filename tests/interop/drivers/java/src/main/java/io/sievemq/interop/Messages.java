package io.sievemq.interop;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;

import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;

/** The messages a run sends (built from the command line) and the event fields that describe messages. */
final class Messages {
    private Messages() {
    }

    /** A message to send, the fields that describe it in events, and its --shard-keys key ("" without). */
    static final class Built {
        final Message msg;
        final Map<String, Object> info;
        final String shardKey;

        Built(Message msg, Map<String, Object> info, String shardKey) {
            this.msg = msg;
            this.info = info;
            this.shardKey = shardKey;
        }
    }

    /** Message number ``i`` of the run: --body, --tags (cycled), --key-prefix, --prop, --delay-level, --shard-keys. */
    static Built build(Args a, int i) {
        String topic = a.need("--topic");
        String[] tags = a.get("--tags", "").isEmpty() ? new String[0] : a.get("--tags", "").split(",");
        int shards = a.i("--shard-keys", 0);
        String key = shards > 0 ? "k" + (i % shards) : "";
        String seq = shards > 0 ? String.valueOf(i / shards) : String.valueOf(i);
        String body = a.get("--body", "body-{i}").replace("{i}", String.valueOf(i)).replace("{key}", key)
            .replace("{seq}", seq);
        Message m = new Message(topic, body.getBytes(StandardCharsets.UTF_8));
        Map<String, Object> info = Out.map("i", i);
        if (tags.length > 0) {
            m.setTags(tags[i % tags.length]);
            info.put("tags", tags[i % tags.length]);
        }
        String prefix = a.get("--key-prefix", "");
        if (!prefix.isEmpty()) {
            m.setKeys(prefix + i);
            info.put("keys", prefix + i);
        }
        Map<String, Object> props = new LinkedHashMap<String, Object>();
        for (String kv : a.all("--prop")) {
            int eq = kv.indexOf('=');
            if (eq < 0) {
                throw new IllegalArgumentException("--prop wants K=V, got " + kv);
            }
            String v = kv.substring(eq + 1).replace("{i}", String.valueOf(i));
            m.putUserProperty(kv.substring(0, eq), v);
            props.put(kv.substring(0, eq), v);
        }
        if (!props.isEmpty()) {
            info.put("props", props);
        }
        int delay = a.i("--delay-level", 0);
        if (delay > 0) {
            m.setDelayTimeLevel(delay);
        }
        if (shards > 0) {
            info.put("shard_key", key);
        }
        info.put("body", body);
        info.put("body_md5", md5(m.getBody()));
        return new Built(m, info, key);
    }

    /** The fields of a "sent" event: the message's ``info``, then what the broker answered. */
    static Map<String, Object> sentFields(Map<String, Object> info, SendResult r) {
        Map<String, Object> f = new LinkedHashMap<String, Object>(info);
        f.put("msg_id", r.getMsgId());
        f.put("offset_msg_id", r.getOffsetMsgId());
        f.put("status", r.getSendStatus().name());
        f.put("queue_id", r.getMessageQueue() == null ? null : r.getMessageQueue().getQueueId());
        f.put("broker", r.getMessageQueue() == null ? null : r.getMessageQueue().getBrokerName());
        f.put("offset", r.getQueueOffset());
        return f;
    }

    /** The fields of a received (or checked) message. */
    static Map<String, Object> describe(MessageExt m) {
        byte[] body = m.getBody() == null ? new byte[0] : m.getBody();
        Map<String, Object> d = new LinkedHashMap<String, Object>();
        d.put("msg_id", m.getMsgId());
        d.put("offset_msg_id", m instanceof MessageClientExt ? ((MessageClientExt) m).getOffsetMsgId() : m.getMsgId());
        d.put("topic", m.getTopic());
        d.put("tags", m.getTags());
        d.put("keys", m.getKeys());
        d.put("body", new String(body, StandardCharsets.UTF_8));
        d.put("body_len", body.length);
        d.put("body_md5", md5(body));
        d.put("props", new TreeMap<String, String>(m.getProperties()));
        d.put("queue_id", m.getQueueId());
        d.put("queue_offset", m.getQueueOffset());
        d.put("reconsume_times", m.getReconsumeTimes());
        d.put("born_timestamp", m.getBornTimestamp());
        d.put("store_timestamp", m.getStoreTimestamp());
        d.put("broker", m.getBrokerName());
        return d;
    }

    /** The message's client-side id (UNIQ_KEY), or a received message's id when it has none. */
    static String uniqKey(Message m) {
        String k = m.getProperty("UNIQ_KEY");
        return k != null ? k : (m instanceof MessageExt ? ((MessageExt) m).getMsgId() : null);
    }

    static String md5(byte[] b) {
        try {
            byte[] d = MessageDigest.getInstance("MD5").digest(b);
            StringBuilder sb = new StringBuilder();
            for (byte x : d) {
                sb.append(String.format("%02x", x & 0xff));
            }
            return sb.toString();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }
}
