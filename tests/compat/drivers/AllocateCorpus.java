/*
 * sievemq compatibility tests: rocketmq-client's own queue allocation strategies over a corpus
 * (tests/compat/test_allocate.py compares sievemq's client/allocate.py with them).
 *
 * Reads one case per line on stdin, tab-separated:
 *   caseId  strategy  clientIds (comma-separated)  queues (comma-separated topic/brokerName/queueId)
 * strategy: averagely, circle or hashN (AllocateMessageQueueConsistentHash with N virtual nodes). Prints, for each
 * client of each case, one line: caseId  clientId  its queues (comma-separated, as given; empty when none). The lists
 * are sorted first, as RebalanceImpl sorts them before it calls a strategy. Ends at end of input.
 */

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragelyByCircle;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueConsistentHash;
import org.apache.rocketmq.common.message.MessageQueue;

public class AllocateCorpus {
    static AllocateMessageQueueStrategy strategy(String name) {
        if (name.equals("averagely")) {
            return new AllocateMessageQueueAveragely();
        }
        if (name.equals("circle")) {
            return new AllocateMessageQueueAveragelyByCircle();
        }
        if (name.startsWith("hash")) {
            return new AllocateMessageQueueConsistentHash(Integer.parseInt(name.substring(4)));
        }
        throw new IllegalArgumentException("unknown strategy " + name);
    }

    static String text(MessageQueue mq) {
        return mq.getTopic() + "/" + mq.getBrokerName() + "/" + mq.getQueueId();
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, false, "UTF-8");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split("\t", -1);
            AllocateMessageQueueStrategy s = strategy(f[1]);
            List<String> cids = new ArrayList<>(Arrays.asList(f[2].split(",")));
            List<MessageQueue> mqs = new ArrayList<>();
            for (String q : f[3].split(",")) {
                String[] p = q.split("/");
                mqs.add(new MessageQueue(p[0], p[1], Integer.parseInt(p[2])));
            }
            Collections.sort(cids);
            Collections.sort(mqs);
            for (String cid : cids) {
                List<String> mine = new ArrayList<>();
                for (MessageQueue mq : s.allocate("compat", cid, mqs, cids)) {
                    mine.add(text(mq));
                }
                out.println(f[0] + "\t" + cid + "\t" + String.join(",", mine));
            }
        }
        out.flush();
    }
}
