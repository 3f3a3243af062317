// sievemq's interop driver for Apache RocketMQ's Go client (github.com/apache/rocketmq-client-go/v2), which speaks
// the 4.x remoting protocol to name servers and brokers.
//
// It prints one JSON object per line on stdout (the client's own log goes to stderr): started, sent, received,
// rejected, assigned, committed, pulled, error, timeout, done. Exit codes: 0 ok, 1 send/start failure, 2 usage error,
// 3 consume timeout, 4 watchdog (the client hung). See tests/interop/clients.py and tests/interop/test_go_clients.py.
//
// Commands: produce, consume, pull (run with no argument for the options).
package main

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

const usage = `usage: driver COMMAND --namesrv H:P --topic T --group G [options]
  common:   --access-key AK --secret-key SK (primitive.Credentials) --timeout S (whole run, default 60)
            --instance NAME
  produce:  --mode sync|async|oneway|batch|selector (several: sync,batch) --count N (per mode)
            --tags A,B --key-prefix k --prop K=V (repeatable, {i} replaced) --batch-size N
            --body TEMPLATE ({i}, and with --shard-keys {key} {seq}) --body-size N (padded with dots to N
            bytes: over 4 KiB the client compresses) --delay-level L
            --shard-keys N (selector: message i goes by key k<i%N> to queue (i%N) % queues)
            --queue Q (selector: every message to queue Q) --send-timeout-ms MS --keep-going --start-index I
  consume:  --expr TAGS | --sql SQL92 --expect N --linger S --from first|last|timestamp --timestamp MS
            --model clustering|broadcasting --orderly --reconsume N (ConsumeRetryLater, or in orderly mode
            SuspendCurrentQueueAMoment, to the first N deliveries of each message) --retry-delay-level L
            --max-reconsume-times N --batch-max N (ConsumeMessageBatchMaxSize)
  pull:     --mode poll|from --expr TAGS | --sql SQL92 --expect N --linger S --from first|last
            poll: Subscribe, then Poll and ACK (the client's rebalance, pulls and offsets; "committed" per queue
            at the end, committed to the broker by Shutdown); --pull-batch N (PullBatchSize, unset: the client's
            default)
            from: PullFrom every queue from --seek-offset O (default 0), offsets kept here ("pulled" events
            for answers without messages)`

var flags = map[string]bool{"--orderly": true, "--keep-going": true}

var options = map[string]bool{
	"--namesrv": true, "--topic": true, "--group": true, "--access-key": true, "--secret-key": true,
	"--timeout": true, "--instance": true, "--mode": true, "--count": true, "--tags": true, "--key-prefix": true,
	"--prop": true, "--body": true, "--body-size": true, "--batch-size": true, "--shard-keys": true,
	"--queue": true, "--delay-level": true, "--send-timeout-ms": true, "--start-index": true, "--expr": true,
	"--sql": true, "--expect": true, "--linger": true, "--from": true, "--timestamp": true, "--model": true,
	"--reconsume": true, "--retry-delay-level": true, "--max-reconsume-times": true, "--batch-max": true,
	"--seek-offset": true, "--pull-batch": true,
}

// ------------------------------------------------------------------------------------------------ output

var (
	outMu sync.Mutex
	t0    = time.Now()
)

// emit prints one JSON line: {"event": event, ...fields}.
func emit(event string, fields map[string]any) {
	obj := make(map[string]any, len(fields)+1)
	for k, v := range fields {
		obj[k] = v
	}
	obj["event"] = event
	b, err := json.Marshal(obj)
	if err != nil {
		b, _ = json.Marshal(map[string]any{"event": "error", "error": "json: " + err.Error()})
	}
	outMu.Lock()
	defer outMu.Unlock()
	os.Stdout.Write(append(b, '\n'))
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "[driver %s] %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, a...))
}

func elapsed() float64 {
	return float64(time.Since(t0).Milliseconds()) / 1000
}

// responseCode finds the broker's answer code in the client's errors ("CODE: 16, DESC: ...").
var responseCode = regexp.MustCompile(`CODE: (-?\d+)`)

func errorFields(stage string, err error) map[string]any {
	f := map[string]any{"stage": stage, "error": err.Error(), "error_type": fmt.Sprintf("%T", err)}
	if m := responseCode.FindStringSubmatch(err.Error()); m != nil {
		f["response_code"], _ = strconv.Atoi(m[1])
	}
	return f
}

// ------------------------------------------------------------------------------------------------- args

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

type args struct {
	command string
	values  map[string][]string
}

func parseArgs(argv []string) (*args, error) {
	if len(argv) == 0 {
		return nil, usageError{"no command"}
	}
	a := &args{command: argv[0], values: map[string][]string{}}
	for i := 1; i < len(argv); i++ {
		k := argv[i]
		switch {
		case flags[k]:
			a.values[k] = append(a.values[k], "true")
		case options[k]:
			if i+1 >= len(argv) {
				return nil, usageError{k + " wants a value"}
			}
			i++
			a.values[k] = append(a.values[k], argv[i])
		default:
			return nil, usageError{"unknown argument " + k}
		}
	}
	return a, nil
}

func (a *args) get(k, dflt string) string {
	if v := a.values[k]; len(v) > 0 {
		return v[len(v)-1]
	}
	return dflt
}

func (a *args) has(k string) bool { return len(a.values[k]) > 0 }

func (a *args) all(k string) []string { return a.values[k] }

func (a *args) need(k string) string {
	v := a.get(k, "")
	if v == "" {
		panic(usageError{a.command + " needs " + k})
	}
	return v
}

func (a *args) int(k string, dflt int) int {
	v := a.get(k, "")
	if v == "" {
		return dflt
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		panic(usageError{k + " wants an integer, got " + v})
	}
	return n
}

func (a *args) float(k string, dflt float64) float64 {
	v := a.get(k, "")
	if v == "" {
		return dflt
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		panic(usageError{k + " wants a number, got " + v})
	}
	return f
}

func (a *args) seconds(k string, dflt float64) time.Duration {
	return time.Duration(a.float(k, dflt) * float64(time.Second))
}

func (a *args) credentials() (primitive.Credentials, bool) {
	ak := a.get("--access-key", "")
	if ak == "" {
		return primitive.Credentials{}, false
	}
	return primitive.Credentials{AccessKey: ak, SecretKey: a.get("--secret-key", "")}, true
}

// ------------------------------------------------------------------------------------------ lifecycle

var (
	stopCh   = make(chan struct{})
	stopOnce sync.Once
)

// stopped is closed when SIGTERM or SIGINT arrives: waits end and the command reports "done".
func stopped() <-chan struct{} { return stopCh }

func isStopped() bool {
	select {
	case <-stopCh:
		return true
	default:
		return false
	}
}

// watchdog ends the run (exit 4) if the client hangs past the run's limit.
func watchdog(limit time.Duration, what string) {
	go func() {
		time.Sleep(limit)
		emit("error", map[string]any{"error": fmt.Sprintf("watchdog: %s did not finish within %s", what, limit),
			"fatal": true, "error_type": "WatchdogTimeout"})
		os.Exit(4)
	}()
}

// shutdownQuietly runs a client's shutdown for at most limit.
func shutdownQuietly(what string, limit time.Duration, f func() error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := f(); err != nil {
			logf("%s shutdown failed: %v", what, err)
		}
	}()
	select {
	case <-done:
	case <-time.After(limit):
		logf("%s shutdown did not finish within %s; exiting anyway", what, limit)
	}
}

// ------------------------------------------------------------------------------------------- messages

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

func copyProps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sendStatus(s primitive.SendStatus) string {
	switch s {
	case primitive.SendOK:
		return "SEND_OK"
	case primitive.SendFlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case primitive.SendFlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	case primitive.SendSlaveNotAvailable:
		return "SLAVE_NOT_AVAILABLE"
	default:
		return "UNKNOWN_ERROR"
	}
}

// describe is what a "received" (or "rejected") event says of a message.
func describe(m *primitive.MessageExt) map[string]any {
	d := map[string]any{
		"msg_id":          m.MsgId,
		"offset_msg_id":   m.OffsetMsgId,
		"topic":           m.Topic,
		"tags":            m.GetTags(),
		"keys":            m.GetKeys(),
		"body":            string(m.Body),
		"body_len":        len(m.Body),
		"body_md5":        md5hex(m.Body),
		"props":           copyProps(m.GetProperties()),
		"queue_offset":    m.QueueOffset,
		"reconsume_times": m.ReconsumeTimes,
		"born_timestamp":  m.BornTimestamp,
		"store_timestamp": m.StoreTimestamp,
		"store_host":      m.StoreHost,
	}
	if m.Queue != nil {
		d["queue_id"] = m.Queue.QueueId
		d["broker"] = m.Queue.BrokerName
	}
	return d
}

// uniqKey identifies a message across its deliveries: its UNIQ_KEY, else (a message the client gave none, as it
// gives none to batched messages) the stored id of its first record, which a retry copy names in ORIGIN_MESSAGE_ID.
func uniqKey(m *primitive.MessageExt) string {
	if k := m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex); k != "" {
		return k
	}
	if k := m.GetProperty(primitive.PropertyOriginMessageId); k != "" {
		return k
	}
	return m.OffsetMsgId
}

func queueIDs(mqs []*primitive.MessageQueue, topic string) []int {
	ids := []int{}
	for _, mq := range mqs {
		if mq.Topic == topic {
			ids = append(ids, mq.QueueId)
		}
	}
	sort.Ints(ids)
	return ids
}

// --------------------------------------------------------------------------------------------------- main

func main() {
	if os.Getenv("ROCKETMQ_GO_LOG_LEVEL") == "" {
		rlog.SetLogLevel("warn")
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		stopOnce.Do(func() { close(stopCh) })
		<-sig
		os.Exit(130)
	}()
	os.Exit(run(os.Args[1:]))
}

func run(argv []string) (code int) {
	defer func() {
		if r := recover(); r != nil {
			if u, ok := r.(usageError); ok {
				emit("error", map[string]any{"stage": "usage", "fatal": true, "error": u.msg})
				fmt.Fprintln(os.Stderr, usage)
				code = 2
				return
			}
			panic(r)
		}
	}()
	a, err := parseArgs(argv)
	if err != nil {
		panic(err)
	}
	a.need("--namesrv")
	a.need("--topic")
	a.need("--group")
	switch a.command {
	case "produce":
		return produce(a)
	case "consume":
		return consume(a)
	case "pull":
		return pull(a)
	default:
		panic(usageError{"unknown command " + a.command})
	}
}

// splitNonEmpty splits s at sep, dropping empty parts.
func splitNonEmpty(s, sep string) []string {
	out := []string{}
	for _, p := range strings.Split(s, sep) {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}
