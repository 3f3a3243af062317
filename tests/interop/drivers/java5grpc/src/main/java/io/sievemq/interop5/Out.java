package io.sievemq.interop5;

import java.io.PrintStream;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.text.SimpleDateFormat;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Date;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.rocketmq.client.apis.message.MessageView;

/** The driver's output: one JSON object per line on the real stdout, each with {@code ts} and {@code ts_ms}. */
final class Out {
    private static final Pattern RESPONSE_CODE = Pattern.compile("response-code=(\\d+)");
    private static PrintStream out;

    private Out() {
    }

    static void init(PrintStream stream) {
        out = stream;
    }

    /** One event: its name, then the fields, then the wall-clock time it was printed (epoch s and ms). */
    static synchronized void emit(String event, Map<String, Object> fields) {
        long now = System.currentTimeMillis();
        Map<String, Object> obj = new LinkedHashMap<String, Object>();
        obj.put("event", event);
        obj.putAll(fields);
        obj.put("ts", BigDecimal.valueOf(now, 3));
        obj.put("ts_ms", now);
        StringBuilder sb = new StringBuilder();
        json(sb, obj);
        out.print(sb.append('\n').toString());
        out.flush();
    }

    static void emit(String event, Object... kv) {
        emit(event, map(kv));
    }

    static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<String, Object>();
        for (int i = 0; i + 1 < kv.length; i += 2) {
            m.put(String.valueOf(kv[i]), kv[i + 1]);
        }
        return m;
    }

    /** An error's fields: {@code error} (class and message), {@code error_type}, and {@code code}, the v2 status
     * code the client reported ("response-code=N" in a ClientException's message), when there is one. */
    static Map<String, Object> errorFields(Throwable t) {
        Throwable c = t;
        while (c.getCause() != null && !(c instanceof org.apache.rocketmq.client.apis.ClientException)) {
            c = c.getCause();
        }
        Map<String, Object> m = map("error", c.getClass().getSimpleName() + ": " + c.getMessage(),
            "error_type", c.getClass().getSimpleName());
        Matcher code = RESPONSE_CODE.matcher(String.valueOf(c.getMessage()));
        if (code.find()) {
            m.put("code", Integer.parseInt(code.group(1)));
        }
        return m;
    }

    /** What a received message looks like in events. */
    static Map<String, Object> messageFields(MessageView m) {
        Map<String, Object> f = map("message_id", m.getMessageId().toString(), "topic", m.getTopic(),
            "body", body(m), "tag", m.getTag().orElse(null), "keys", new ArrayList<String>(m.getKeys()),
            "group", m.getMessageGroup().orElse(null), "delivery_ms", m.getDeliveryTimestamp().orElse(null),
            "born_ms", m.getBornTimestamp(), "attempt", m.getDeliveryAttempt());
        f.put("properties", new TreeMap<String, String>(m.getProperties()));
        return f;
    }

    /** An event about a message: its id, body, message group and delivery attempt. */
    static void brief(String event, MessageView m) {
        emit(event, "message_id", m.getMessageId().toString(), "body", body(m), "group",
            m.getMessageGroup().orElse(null), "attempt", m.getDeliveryAttempt());
    }

    static String body(MessageView m) {
        ByteBuffer b = m.getBody().duplicate();
        byte[] bytes = new byte[b.remaining()];
        b.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    static void log(String msg) {
        System.err.println("[driver5 " + new SimpleDateFormat("HH:mm:ss.SSS").format(new Date()) + "] " + msg);
    }

    static void json(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof BigDecimal) {
            sb.append(((BigDecimal) v).toPlainString());
        } else if (v instanceof Boolean || v instanceof Integer || v instanceof Long || v instanceof Short) {
            sb.append(v);
        } else if (v instanceof Number) {
            double d = ((Number) v).doubleValue();
            sb.append(Double.isNaN(d) || Double.isInfinite(d) ? "null" : String.valueOf(d));
        } else if (v instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                str(sb, String.valueOf(e.getKey()));
                sb.append(':');
                json(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof Collection) {
            sb.append('[');
            boolean first = true;
            for (Object o : (Collection<?>) v) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                json(sb, o);
            }
            sb.append(']');
        } else {
            str(sb, String.valueOf(v));
        }
    }

    static void str(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }
}
