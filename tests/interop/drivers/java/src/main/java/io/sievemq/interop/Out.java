package io.sievemq.interop;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.io.UnsupportedEncodingException;
import java.text.SimpleDateFormat;
import java.util.Collection;
import java.util.Date;
import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;

/**
 * The driver's output: one JSON object per line on the real stdout (an event), log lines on stderr.
 *
 * <p>{@link #init} takes stdout for the events and points System.out at stderr, so that nothing the client prints
 * comes between them.
 */
final class Out {
    private static final long T0 = System.nanoTime();
    private static PrintStream out;

    private Out() {
    }

    /** Keeps the real stdout for events; System.out goes to stderr from now on. */
    static void init() {
        try {
            out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        } catch (UnsupportedEncodingException e) {
            throw new IllegalStateException(e);
        }
        System.setOut(System.err);
    }

    /** One JSON line on the real stdout: {"event": event, ...fields}. */
    static synchronized void emit(String event, Map<String, Object> fields) {
        Map<String, Object> obj = new LinkedHashMap<String, Object>();
        obj.put("event", event);
        obj.putAll(fields);
        StringBuilder sb = new StringBuilder();
        json(sb, obj);
        out.print(sb.append('\n').toString());
        out.flush();
    }

    static void emit(String event, Object... kv) {
        emit(event, map(kv));
    }

    /** An "error" event for ``t`` (see {@link #errorFields}) with the fields ``kv`` after its own. */
    static void error(Throwable t, Object... kv) {
        Map<String, Object> f = errorFields(t);
        f.putAll(map(kv));
        emit("error", f);
    }

    /** A map of the key, value pairs ``kv``, in their order. */
    static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<String, Object>();
        for (int i = 0; i + 1 < kv.length; i += 2) {
            m.put(String.valueOf(kv[i]), kv[i + 1]);
        }
        return m;
    }

    /** error, error_type and (from a broker's answer, where there is one) response_code. */
    static Map<String, Object> errorFields(Throwable t) {
        Map<String, Object> m = map("error", t.getClass().getSimpleName() + ": " + t.getMessage(),
            "error_type", t.getClass().getSimpleName());
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof MQBrokerException) {
                m.put("response_code", ((MQBrokerException) c).getResponseCode());
                break;
            }
            if (c instanceof MQClientException && ((MQClientException) c).getResponseCode() > 0) {
                m.put("response_code", ((MQClientException) c).getResponseCode());
                break;
            }
        }
        return m;
    }

    static void log(String msg) {
        System.err.println("[driver " + new SimpleDateFormat("HH:mm:ss.SSS").format(new Date()) + "] " + msg);
    }

    /** Seconds since the driver started, to the millisecond. */
    static double elapsed() {
        return Math.round((System.nanoTime() - T0) / 1e6) / 1000.0;
    }

    /** Ends the JVM now (the client's threads are not daemons, and its shutdown hooks are not needed). */
    static void halt(int code) {
        out.flush();
        System.err.flush();
        Runtime.getRuntime().halt(code);
    }

    private static void json(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof Boolean || v instanceof Integer || v instanceof Long || v instanceof Short) {
            sb.append(v);
        } else if (v instanceof Number) {
            double d = ((Number) v).doubleValue();
            sb.append(Double.isNaN(d) || Double.isInfinite(d) ? "null" : String.valueOf(d));
        } else if (v instanceof Map) {
            sb.append('{');
            String sep = "";
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                sb.append(sep);
                sep = ",";
                str(sb, String.valueOf(e.getKey()));
                sb.append(':');
                json(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof Collection) {
            sb.append('[');
            String sep = "";
            for (Object o : (Collection<?>) v) {
                sb.append(sep);
                sep = ",";
                json(sb, o);
            }
            sb.append(']');
        } else {
            str(sb, String.valueOf(v));
        }
    }

    private static void str(StringBuilder sb, String s) {
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
