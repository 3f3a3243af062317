package main

import (
	"context"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// state is what a consumer saw: deliveries per message (by UNIQ_KEY), accepted ones, and when --expect was reached.
type state struct {
	expect    int
	reconsume int
	mu        sync.Mutex
	seen      map[string]int
	accepted  map[string]int
	delivered int
	reached   chan struct{}
	once      sync.Once
}

func newState(expect, reconsume int) *state {
	return &state{expect: expect, reconsume: reconsume, seen: map[string]int{}, accepted: map[string]int{},
		reached: make(chan struct{})}
}

// handle reports one delivery; false asks for it again.
func (s *state) handle(m *primitive.MessageExt, extra map[string]any) bool {
	d := describe(m)
	for k, v := range extra {
		d[k] = v
	}
	key := uniqKey(m)
	s.mu.Lock()
	s.delivered++
	s.seen[key]++
	n := s.seen[key]
	reject := n <= s.reconsume
	dup := false
	if !reject {
		s.accepted[key]++
		dup = s.accepted[key] > 1
	}
	unique := len(s.accepted)
	s.mu.Unlock()
	d["delivery"] = n
	d["elapsed_s"] = elapsed()
	if reject {
		emit("rejected", d)
		return false
	}
	d["duplicate"] = dup
	emit("received", d)
	if s.expect > 0 && unique >= s.expect {
		s.once.Do(func() { close(s.reached) })
	}
	return true
}

func (s *state) summary() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	dups := 0
	for _, c := range s.accepted {
		dups += c - 1
	}
	return map[string]any{"deliveries": s.delivered, "unique": len(s.accepted), "duplicates": dups}
}

// await waits for --expect (3 when it does not come within --timeout), then lingers; a stop ends both.
func (s *state) await(a *args, timeout time.Duration) int {
	if s.expect > 0 {
		select {
		case <-s.reached:
		case <-stopped():
			return 0
		case <-time.After(timeout):
			return 3
		}
	}
	select {
	case <-time.After(a.seconds("--linger", 2)):
	case <-stopped():
	}
	return 0
}

func fromWhere(s string) consumer.ConsumeFromWhere {
	switch s {
	case "first":
		return consumer.ConsumeFromFirstOffset
	case "last":
		return consumer.ConsumeFromLastOffset
	case "timestamp":
		return consumer.ConsumeFromTimestamp
	}
	panic(usageError{"--from wants first|last|timestamp, got " + s})
}

func selector(a *args) consumer.MessageSelector {
	if sql := a.get("--sql", ""); sql != "" {
		return consumer.MessageSelector{Type: consumer.SQL92, Expression: sql}
	}
	return consumer.MessageSelector{Type: consumer.TAG, Expression: a.get("--expr", "*")}
}

func commonConsumerOptions(a *args) []consumer.Option {
	opts := []consumer.Option{
		consumer.WithNameServer(splitNonEmpty(a.need("--namesrv"), ";")),
		consumer.WithGroupName(a.need("--group")),
		consumer.WithConsumeFromWhere(fromWhere(a.get("--from", "last"))),
	}
	if c, ok := a.credentials(); ok {
		opts = append(opts, consumer.WithCredentials(c))
	}
	if name := a.get("--instance", ""); name != "" {
		opts = append(opts, consumer.WithInstance(name))
	}
	return opts
}

// watchAssignment reports the queues of topic the consumer holds (its process queues) whenever they change.
func watchAssignment(queues func() []primitive.MessageQueue, topic string) {
	go func() {
		var last []int
		for !isStopped() {
			ids := []int{}
			for _, mq := range queues() {
				if mq.Topic == topic {
					ids = append(ids, mq.QueueId)
				}
			}
			sort.Ints(ids)
			if last == nil || !reflect.DeepEqual(ids, last) {
				last = ids
				emit("assigned", map[string]any{"topic": topic, "queues": ids})
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
}

func consume(a *args) int {
	timeout := a.seconds("--timeout", 60)
	watchdog(timeout+a.seconds("--linger", 2)+30*time.Second, "consume")
	topic := a.need("--topic")
	st := newState(a.int("--expect", 0), a.int("--reconsume", 0))
	retryDelay := a.int("--retry-delay-level", 0)
	model := a.get("--model", "clustering")
	orderly := a.has("--orderly")
	opts := commonConsumerOptions(a)
	switch model {
	case "clustering":
		opts = append(opts, consumer.WithConsumerModel(consumer.Clustering))
	case "broadcasting":
		opts = append(opts, consumer.WithConsumerModel(consumer.BroadCasting))
	default:
		panic(usageError{"--model wants clustering|broadcasting, got " + model})
	}
	if orderly {
		opts = append(opts, consumer.WithConsumerOrder(true))
	}
	if n := a.int("--max-reconsume-times", -1); n >= 0 {
		opts = append(opts, consumer.WithMaxReconsumeTimes(int32(n)))
	}
	if n := a.int("--batch-max", 0); n > 0 {
		opts = append(opts, consumer.WithConsumeMessageBatchMaxSize(n))
	}
	if from := a.get("--from", "last"); from == "timestamp" {
		ms := int64(a.int("--timestamp", 0))
		opts = append(opts, consumer.WithConsumeTimestamp(time.UnixMilli(ms).Format("20060102150405")))
	}
	c, err := consumer.NewPushConsumer(opts...)
	if err == nil {
		err = c.Subscribe(topic, selector(a), func(ctx context.Context, msgs ...*primitive.MessageExt) (
			consumer.ConsumeResult, error) {
			ok := true
			for _, m := range msgs {
				ok = st.handle(m, nil) && ok
			}
			if ok {
				return consumer.ConsumeSuccess, nil
			}
			if orderly {
				return consumer.SuspendCurrentQueueAMoment, nil
			}
			if cc, found := primitive.GetConcurrentlyCtx(ctx); found && retryDelay > 0 {
				cc.DelayLevelWhenNextConsume = retryDelay
			}
			return consumer.ConsumeRetryLater, nil
		})
	}
	if err == nil {
		err = c.Start()
	}
	if err != nil {
		f := errorFields("start", err)
		f["fatal"] = true
		emit("error", f)
		return 1
	}
	emit("started", map[string]any{"role": "consumer", "group": a.need("--group"), "topic": topic,
		"expr": selector(a).Expression, "expression_type": string(selector(a).Type),
		"from_where": a.get("--from", "last"), "model": model, "orderly": orderly})
	watchAssignment(func() []primitive.MessageQueue {
		var out []primitive.MessageQueue
		for mq := range c.GetConsumerRunningInfo(false).MQTable {
			out = append(out, mq)
		}
		return out
	}, topic)
	code := st.await(a, timeout)
	if code == 3 {
		f := st.summary()
		f["expect"] = st.expect
		f["timeout"] = timeout.Seconds()
		emit("timeout", f)
	}
	shutdownQuietly("consumer", 8*time.Second, c.Shutdown)
	f := st.summary()
	f["role"] = "consumer"
	f["exit_code"] = code
	emit("done", f)
	return code
}
