package io.sievemq.interop;

import java.util.List;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyContext;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * The warmup command: starts every client kind once against an address where nothing listens, sending and
 * subscribing on the way, so that a class-data-sharing archive made from this run holds the classes a real run loads
 * (setup_java_clients.sh). A step's failure is only logged.
 */
final class Warmup {
    private Warmup() {
    }

    static int warmup(final Args a) throws Exception {
        final String topic = a.need("--topic");
        final String group = a.need("--group");
        final DefaultMQProducer p = Clients.producer(a, group);
        p.setSendMsgTimeout(300);
        p.setRetryTimesWhenSendFailed(0);
        quietly("producer", new Lifecycle.Step() {
            @Override
            public void run() throws Exception {
                p.start();
                p.send(Messages.build(a, 0).msg);
            }
        });
        quietly("push consumer", new Lifecycle.Step() {
            @Override
            public void run() throws Exception {
                DefaultMQPushConsumer c = Clients.pushConsumer(a, group, false);
                c.subscribe(topic, MessageSelector.bySql("a > 1"));
                c.registerMessageListener(new MessageListenerConcurrently() {
                    @Override
                    public ConsumeConcurrentlyStatus consumeMessage(List<MessageExt> msgs,
                            ConsumeConcurrentlyContext ctx) {
                        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                    }
                });
                c.start();
            }
        });
        quietly("lite pull consumer", new Lifecycle.Step() {
            @Override
            public void run() throws Exception {
                DefaultLitePullConsumer l = new DefaultLitePullConsumer(null, group + "_L", Clients.rpcHook(a));
                l.setNamesrvAddr(a.need("--namesrv"));
                l.subscribe(topic, "*");
                l.start();
                l.poll(10);
            }
        });
        quietly("transaction producer", new Lifecycle.Step() {
            @Override
            public void run() throws Exception {
                TransactionMQProducer t = new TransactionMQProducer(null, group + "_T", Clients.rpcHook(a), false,
                    null);
                t.setNamesrvAddr(a.need("--namesrv"));
                t.start();
            }
        });
        return Lifecycle.done(0, "role", "warmup");
    }

    private static void quietly(String what, Lifecycle.Step step) {
        try {
            step.run();
        } catch (Exception e) {
            Out.log("warmup " + what + ": " + e);
        }
    }
}
