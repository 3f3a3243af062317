package main

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// built is one message to send and what a "sent" event says of it.
type built struct {
	msg   *primitive.Message
	info  map[string]any
	queue int // the queue the selector mode sends it to, -1: any
}

func build(a *args, i int) built {
	tags := splitNonEmpty(a.get("--tags", ""), ",")
	shards := a.int("--shard-keys", 0)
	key, seq := "", strconv.Itoa(i)
	if shards > 0 {
		key, seq = "k"+strconv.Itoa(i%shards), strconv.Itoa(i/shards)
	}
	r := strings.NewReplacer("{i}", strconv.Itoa(i), "{key}", key, "{seq}", seq)
	body := r.Replace(a.get("--body", "body-{i}"))
	if size := a.int("--body-size", 0); len(body) < size {
		// Padding that compresses well: bodies over 4 KiB are sent zlib-compressed by the client.
		body += strings.Repeat(".", size-len(body))
	}
	m := primitive.NewMessage(a.need("--topic"), []byte(body))
	info := map[string]any{"i": i, "body": body, "body_md5": md5hex(m.Body)}
	if len(tags) > 0 {
		m.WithTag(tags[i%len(tags)])
		info["tags"] = tags[i%len(tags)]
	}
	if prefix := a.get("--key-prefix", ""); prefix != "" {
		m.WithKeys([]string{prefix + strconv.Itoa(i)})
		info["keys"] = prefix + strconv.Itoa(i)
	}
	props := map[string]string{}
	for _, kv := range a.all("--prop") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			panic(usageError{"--prop wants K=V, got " + kv})
		}
		v = strings.ReplaceAll(v, "{i}", strconv.Itoa(i))
		m.WithProperty(k, v)
		props[k] = v
	}
	if len(props) > 0 {
		info["props"] = props
	}
	if level := a.int("--delay-level", 0); level > 0 {
		m.WithDelayTimeLevel(level)
	}
	queue := -1
	if q := a.int("--queue", -1); q >= 0 {
		queue = q
	} else if shards > 0 {
		queue = i % shards
	}
	if shards > 0 {
		info["shard_key"] = key
	}
	return built{msg: m, info: info, queue: queue}
}

// chosenQueue is the producer's QueueSelector: a message whose Queue names a queue id goes to the queue with that
// id (modulo the topic's queues); any other round robin, as the client's default selector.
type chosenQueue struct{ fallback producer.QueueSelector }

func (s chosenQueue) Select(m *primitive.Message, mqs []*primitive.MessageQueue, last string) *primitive.MessageQueue {
	if m.Queue != nil && len(mqs) > 0 {
		want := m.Queue.QueueId % len(mqs)
		for _, mq := range mqs {
			if mq.QueueId == want {
				return mq
			}
		}
		return mqs[want]
	}
	return s.fallback.Select(m, mqs, last)
}

func sentFields(info map[string]any, r *primitive.SendResult) map[string]any {
	f := make(map[string]any, len(info)+8)
	for k, v := range info {
		f[k] = v
	}
	f["msg_id"] = r.MsgID
	f["offset_msg_id"] = r.OffsetMsgID
	f["status"] = sendStatus(r.Status)
	f["offset"] = r.QueueOffset
	if r.MessageQueue != nil {
		f["queue_id"] = r.MessageQueue.QueueId
		f["broker"] = r.MessageQueue.BrokerName
	}
	return f
}

func newProducer(a *args) (rocketmq.Producer, error) {
	opts := []producer.Option{
		producer.WithNameServer(splitNonEmpty(a.need("--namesrv"), ";")),
		producer.WithGroupName(a.need("--group")),
		producer.WithSendMsgTimeout(time.Duration(a.int("--send-timeout-ms", 3000)) * time.Millisecond),
		producer.WithQueueSelector(chosenQueue{producer.NewRoundRobinQueueSelector()}),
		producer.WithRetry(2),
	}
	if c, ok := a.credentials(); ok {
		opts = append(opts, producer.WithCredentials(c))
	}
	if name := a.get("--instance", ""); name != "" {
		opts = append(opts, producer.WithInstanceName(name))
	}
	return rocketmq.NewProducer(opts...)
}

func produce(a *args) int {
	modes := a.get("--mode", "sync")
	count := a.int("--count", 1)
	start := a.int("--start-index", 0)
	timeout := a.seconds("--timeout", 60)
	watchdog(timeout+30*time.Second, "produce")
	p, err := newProducer(a)
	if err == nil {
		err = p.Start()
	}
	if err != nil {
		f := errorFields("start", err)
		f["fatal"] = true
		emit("error", f)
		return 1
	}
	emit("started", map[string]any{"role": "producer", "group": a.need("--group"), "topic": a.need("--topic"),
		"mode": modes})
	var sent, failed atomic.Int64
	for _, mode := range splitNonEmpty(modes, ",") {
		if !produceMode(p, a, mode, start, count, timeout, &sent, &failed) {
			break
		}
		start += count
	}
	shutdownQuietly("producer", 10*time.Second, p.Shutdown)
	code := 0
	if failed.Load() > 0 {
		code = 1
	}
	emit("done", map[string]any{"role": "producer", "sent": sent.Load(), "failed": failed.Load(), "exit_code": code})
	return code
}

// produceMode sends messages start..start+count-1 one way; false when one failed and --keep-going is not given.
func produceMode(p rocketmq.Producer, a *args, mode string, start, count int, timeout time.Duration,
	sent, failed *atomic.Int64) bool {
	keepGoing := a.has("--keep-going")
	ctx := context.Background()
	switch mode {
	case "batch":
		size := a.int("--batch-size", 4)
		if size < 1 {
			size = 1
		}
		for s, b := start, 0; s < start+count; s, b = s+size, b+1 {
			var chunk []built
			var msgs []*primitive.Message
			end := s + size
			if end > start+count {
				end = start + count
			}
			for i := s; i < end; i++ {
				x := build(a, i)
				chunk = append(chunk, x)
				msgs = append(msgs, x.msg)
			}
			r, err := p.SendSync(ctx, msgs...)
			if err != nil {
				failed.Add(int64(len(chunk)))
				f := errorFields("send_batch", err)
				f["batch"] = b
				emit("error", f)
				if !keepGoing {
					return false
				}
				continue
			}
			ids := strings.Split(r.MsgID, ",")
			for j, x := range chunk {
				f := sentFields(x.info, r)
				f["mode"] = mode
				f["batch"] = b
				f["offset"] = r.QueueOffset + int64(j)
				if len(ids) == len(chunk) {
					f["msg_id"] = ids[j]
				}
				emit("sent", f)
				sent.Add(1)
			}
		}
		return true
	case "async":
		var wg sync.WaitGroup
		before := failed.Load()
		for i := start; i < start+count; i++ {
			x := build(a, i)
			x.info["mode"] = mode
			wg.Add(1)
			err := p.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, err error) {
				defer wg.Done()
				if err != nil {
					failed.Add(1)
					f := errorFields("send_async", err)
					f["i"] = x.info["i"]
					emit("error", f)
					return
				}
				sent.Add(1)
				emit("sent", sentFields(x.info, r))
			}, x.msg)
			if err != nil {
				wg.Done()
				failed.Add(1)
				f := errorFields("send_async", err)
				f["i"] = i
				emit("error", f)
			}
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(timeout):
			emit("error", map[string]any{"stage": "send_async", "error": "callbacks missing after " + timeout.String()})
			failed.Add(1)
		}
		return keepGoing || failed.Load() == before
	case "sync", "selector", "oneway":
	default:
		panic(usageError{"unknown --mode " + mode})
	}
	for i := start; i < start+count; i++ {
		x := build(a, i)
		x.info["mode"] = mode
		var err error
		switch mode {
		case "sync":
			var r *primitive.SendResult
			if r, err = p.SendSync(ctx, x.msg); err == nil {
				emit("sent", sentFields(x.info, r))
			}
		case "selector":
			if x.queue < 0 {
				panic(usageError{"--mode selector needs --queue or --shard-keys"})
			}
			x.msg.Queue = &primitive.MessageQueue{QueueId: x.queue}
			var r *primitive.SendResult
			if r, err = p.SendSync(ctx, x.msg); err == nil {
				f := sentFields(x.info, r)
				f["chosen_queue"] = x.queue
				emit("sent", f)
			}
		case "oneway":
			if err = p.SendOneWay(ctx, x.msg); err == nil {
				f := x.info
				f["msg_id"] = x.msg.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex)
				f["status"] = "ONEWAY"
				emit("sent", f)
			}
		}
		if err != nil {
			failed.Add(1)
			f := errorFields("send", err)
			f["i"] = i
			f["mode"] = mode
			emit("error", f)
			if !keepGoing {
				return false
			}
			continue
		}
		sent.Add(1)
	}
	return true
}
