package io.sievemq.interop;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/** The command line: COMMAND, then flags (--trace) and options with a value (--topic T, repeatable: the last wins). */
final class Args {
    private static final Set<String> FLAGS = new HashSet<String>(Arrays.asList(
        "--trace", "--orderly", "--commit", "--keep-going", "--reply"));
    private static final Set<String> OPTIONS = new HashSet<String>(Arrays.asList(
        "--namesrv", "--topic", "--group", "--access-key", "--secret-key", "--timeout", "--instance", "--mode",
        "--count", "--tags", "--key-prefix", "--prop", "--body", "--batch-size", "--shard-keys", "--delay-level",
        "--send-timeout-ms", "--start-index", "--expr", "--sql", "--expect", "--linger", "--from", "--timestamp",
        "--model", "--reconsume", "--retry-delay-level", "--max-reconsume-times", "--seek-offset", "--plan",
        "--unknown-checks", "--check-answer", "--request-timeout-ms", "--poll-timeout-ms", "--interval-ms", "--duration",
        "--poll-namesrv-ms"));

    final String command;
    private final Map<String, List<String>> values = new HashMap<String, List<String>>();

    /** Parses ``argv``; IllegalArgumentException for an unknown argument or an option without its value. */
    Args(String[] argv) {
        if (argv.length == 0) {
            throw new IllegalArgumentException("no command");
        }
        command = argv[0];
        for (int i = 1; i < argv.length; i++) {
            String a = argv[i];
            if (FLAGS.contains(a)) {
                put(a, "true");
            } else if (OPTIONS.contains(a)) {
                if (i + 1 >= argv.length) {
                    throw new IllegalArgumentException(a + " wants a value");
                }
                put(a, argv[++i]);
            } else {
                throw new IllegalArgumentException("unknown argument " + a);
            }
        }
    }

    private void put(String k, String v) {
        List<String> l = values.get(k);
        if (l == null) {
            l = new ArrayList<String>();
            values.put(k, l);
        }
        l.add(v);
    }

    String get(String k, String dflt) {
        List<String> l = values.get(k);
        return l == null ? dflt : l.get(l.size() - 1);
    }

    /** The option's value; IllegalArgumentException (a usage error) when it is not given. */
    String need(String k) {
        String v = get(k, null);
        if (v == null) {
            throw new IllegalArgumentException(command + " needs " + k);
        }
        return v;
    }

    /** Every value of a repeatable option, in order. */
    List<String> all(String k) {
        List<String> l = values.get(k);
        return l == null ? new ArrayList<String>() : l;
    }

    int i(String k, int dflt) {
        return Integer.parseInt(get(k, String.valueOf(dflt)));
    }

    long l(String k, long dflt) {
        return Long.parseLong(get(k, String.valueOf(dflt)));
    }

    double d(String k, double dflt) {
        return Double.parseDouble(get(k, String.valueOf(dflt)));
    }

    boolean flag(String k) {
        return values.containsKey(k);
    }
}
