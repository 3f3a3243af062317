package io.sievemq.interop;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.apache.rocketmq.common.message.MessageExt;

/**
 * What a consumer saw: deliveries per message (by UNIQ_KEY), the accepted ones, and whether --expect distinct
 * messages came. Each delivery is reported: "received", or "rejected" for the first --reconsume deliveries of a
 * message (the consumer then asks for it again).
 */
final class Deliveries implements Lifecycle.Goal {
    final int expect;
    private final int reconsume;
    private final Map<String, Integer> seen = new HashMap<String, Integer>();
    private final Map<String, Integer> accepted = new HashMap<String, Integer>();
    private int deliveries;
    /** Counted down after the event of the --expect-th distinct message. */
    private final CountDownLatch reached = new CountDownLatch(1);

    Deliveries(int expect, int reconsume) {
        this.expect = expect;
        this.reconsume = reconsume;
    }

    /** Reports one delivery; false asks for it again (RECONSUME_LATER). */
    boolean handle(MessageExt m) {
        Map<String, Object> d = Messages.describe(m);
        String key = Messages.uniqKey(m);
        boolean reject;
        boolean dup;
        int unique;
        synchronized (this) {
            deliveries++;
            int n = seen.containsKey(key) ? seen.get(key) + 1 : 1;
            seen.put(key, n);
            reject = n <= reconsume;
            dup = false;
            if (!reject) {
                int c = accepted.containsKey(key) ? accepted.get(key) + 1 : 1;
                accepted.put(key, c);
                dup = c > 1;
            }
            unique = accepted.size();
            d.put("delivery", n);
        }
        if (reject) {
            Out.emit("rejected", d);
            return false;
        }
        d.put("duplicate", dup);
        d.put("elapsed_s", Out.elapsed());
        Out.emit("received", d);
        if (expect > 0 && unique >= expect) {
            reached.countDown();
        }
        return true;
    }

    /** True without --expect, or once --expect distinct messages were received. */
    @Override
    public boolean reached() {
        return expect <= 0 || reached.getCount() == 0;
    }

    /** deliveries, unique (distinct messages accepted), duplicates (accepted again). */
    synchronized Map<String, Object> summary() {
        int dups = 0;
        for (int c : accepted.values()) {
            dups += c - 1;
        }
        return Out.map("deliveries", deliveries, "unique", accepted.size(), "duplicates", dups);
    }

    /** The "timeout" event of a consumer that did not see --expect messages within ``timeout`` seconds. */
    void reportTimeout(double timeout) {
        Map<String, Object> f = summary();
        f.put("expect", expect);
        f.put("timeout", timeout);
        Out.emit("timeout", f);
    }

    /** Reports "done" for a consumer of ``role`` (see {@link Lifecycle#done}); returns ``code``. */
    int done(String role, int code) {
        Map<String, Object> f = summary();
        f.put("role", role);
        return Lifecycle.done(code, f);
    }
}
