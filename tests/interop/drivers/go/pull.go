package main

import (
	"context"
	"sync"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

var pullStatus = map[primitive.PullStatus]string{
	primitive.PullFound: "FOUND", primitive.PullNoNewMsg: "NO_NEW_MSG", primitive.PullNoMsgMatched: "NO_MATCHED_MSG",
	primitive.PullOffsetIllegal: "OFFSET_ILLEGAL", primitive.PullBrokerTimeout: "BROKER_TIMEOUT",
}

// pull drives the client's pull consumer: "poll" (Subscribe, then Poll and ACK: the client's own rebalance, pulls
// and offsets, committed to the broker at shutdown) or "from" (PullFrom each queue of the topic, offsets chosen here).
func pull(a *args) int {
	timeout := a.seconds("--timeout", 60)
	watchdog(timeout+a.seconds("--linger", 2)+30*time.Second, "pull")
	topic := a.need("--topic")
	mode := a.get("--mode", "poll")
	if mode != "poll" && mode != "from" {
		panic(usageError{"--mode wants poll|from, got " + mode})
	}
	st := newState(a.int("--expect", 0), a.int("--reconsume", 0))
	opts := commonConsumerOptions(a)
	if n := a.int("--pull-batch", 0); n > 0 {
		opts = append(opts, consumer.WithPullBatchSize(int32(n)))
	}
	c, err := rocketmq.NewPullConsumer(opts...)
	if err == nil {
		err = c.Subscribe(topic, selector(a))
	}
	if err == nil {
		err = c.Start()
	}
	var mqs []*primitive.MessageQueue
	if err == nil {
		mqs, err = c.GetTopicRouteInfo(topic)
	}
	if err != nil {
		f := errorFields("start", err)
		f["fatal"] = true
		emit("error", f)
		return 1
	}
	emit("started", map[string]any{"role": "pull", "group": a.need("--group"), "topic": topic, "mode": mode,
		"expr": selector(a).Expression, "expression_type": string(selector(a).Type), "queues": queueIDs(mqs, topic)})
	done := make(chan struct{})
	var wg sync.WaitGroup
	if mode == "poll" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pollLoop(c, st, done)
		}()
	} else {
		seek := int64(a.int("--seek-offset", 0))
		for _, mq := range mqs {
			wg.Add(1)
			go func(mq *primitive.MessageQueue) {
				defer wg.Done()
				pullFromLoop(c, st, mq, seek, done)
			}(mq)
		}
	}
	code := st.await(a, timeout)
	close(done)
	if code == 3 {
		f := st.summary()
		f["expect"] = st.expect
		f["timeout"] = timeout.Seconds()
		emit("timeout", f)
	}
	if mode == "poll" {
		// The poller ends within its poll timeout; a pull held by the broker (from) is left behind.
		wg.Wait()
		for _, mq := range mqs {
			off, err := c.CurrentOffset(mq)
			f := map[string]any{"queue_id": mq.QueueId, "offset": off}
			if err != nil {
				f["error"] = err.Error()
			}
			emit("committed", f)
		}
	}
	shutdownQuietly("pull consumer", 8*time.Second, c.Shutdown)
	f := st.summary()
	f["role"] = "pull"
	f["exit_code"] = code
	emit("done", f)
	return code
}

func pollLoop(c rocketmq.PullConsumer, st *state, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		default:
		}
		cr, err := c.Poll(context.Background(), time.Second)
		if consumer.IsNoNewMsgError(err) {
			continue
		}
		if err != nil {
			emit("error", errorFields("poll", err))
			time.Sleep(time.Second)
			continue
		}
		ok := true
		for _, m := range cr.GetMsgList() {
			ok = st.handle(m, map[string]any{"polled": len(cr.GetMsgList())}) && ok
		}
		if ok {
			c.ACK(context.Background(), cr, consumer.ConsumeSuccess)
		} else {
			c.ACK(context.Background(), cr, consumer.ConsumeRetryLater)
		}
	}
}

func pullFromLoop(c rocketmq.PullConsumer, st *state, mq *primitive.MessageQueue, offset int64, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		default:
		}
		r, err := c.PullFrom(context.Background(), mq, offset, 32)
		if err != nil {
			f := errorFields("pull_from", err)
			f["queue_id"] = mq.QueueId
			f["offset"] = offset
			emit("error", f)
			time.Sleep(time.Second)
			continue
		}
		if r.Status == primitive.PullFound {
			for _, m := range r.GetMessageExts() {
				st.handle(m, map[string]any{"pulled_from": offset})
			}
		} else {
			emit("pulled", map[string]any{"queue_id": mq.QueueId, "offset": offset, "status": pullStatus[r.Status],
				"next_offset": r.NextBeginOffset, "max_offset": r.MaxOffset})
		}
		if r.Status == primitive.PullBrokerTimeout {
			time.Sleep(time.Second)
			continue
		}
		offset = r.NextBeginOffset
	}
}
