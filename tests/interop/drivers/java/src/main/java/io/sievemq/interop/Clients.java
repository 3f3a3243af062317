package io.sievemq.interop;

import java.lang.reflect.Method;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * The clients as the common options set them up: the ACL RPC hook (--access-key/--secret-key), message trace
 * (--trace), the name server, --instance, a producer's --send-timeout-ms, a consumer's --from and --model.
 *
 * <p>AclClientRPCHook has the same name in both client lines: 4.x has it in rocketmq-acl, 5.x in rocketmq-client
 * (pom.xml's profile, switched off by -Drocketmq5).
 */
final class Clients {
    private Clients() {
    }

    /** The AclClientRPCHook of --access-key and --secret-key, or null without them. */
    static RPCHook rpcHook(Args a) {
        String ak = a.get("--access-key", null);
        return ak == null ? null : new AclClientRPCHook(new SessionCredentials(ak, a.get("--secret-key", "")));
    }

    static boolean trace(Args a) {
        return a.flag("--trace");
    }

    /** A producer of ``group`` (not started). */
    static DefaultMQProducer producer(Args a, String group) {
        return configure(new DefaultMQProducer(group, rpcHook(a), trace(a), null), a);
    }

    /** Sets a producer's name server, send timeout and instance name. */
    static <P extends DefaultMQProducer> P configure(P p, Args a) {
        p.setNamesrvAddr(a.need("--namesrv"));
        p.setSendMsgTimeout(a.i("--send-timeout-ms", 3000));
        String instance = a.get("--instance", null);
        if (instance != null) {
            p.setInstanceName(instance);
        }
        return p;
    }

    /** A push consumer of ``group`` on the name server (queues allocated averagely; not started). */
    static DefaultMQPushConsumer pushConsumer(Args a, String group, boolean trace) {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group, rpcHook(a), new AllocateMessageQueueAveragely(),
            trace, null);
        c.setNamesrvAddr(a.need("--namesrv"));
        return c;
    }

    static ConsumeFromWhere fromWhere(String s) {
        if ("first".equals(s)) {
            return ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET;
        }
        if ("last".equals(s)) {
            return ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET;
        }
        if ("timestamp".equals(s)) {
            return ConsumeFromWhere.CONSUME_FROM_TIMESTAMP;
        }
        throw new IllegalArgumentException("--from wants first|last|timestamp, got " + s);
    }

    /** Sets the MessageModel by name (its class moved from common.protocol to remoting.protocol in 5.x). */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static void setMessageModel(Object client, String model) throws Exception {
        for (Method m : client.getClass().getMethods()) {
            if (m.getName().equals("setMessageModel") && m.getParameterTypes().length == 1) {
                Class t = m.getParameterTypes()[0];
                m.invoke(client, Enum.valueOf(t, model.toUpperCase()));
                return;
            }
        }
        throw new IllegalStateException("no setMessageModel on " + client.getClass());
    }
}
