package faultmatrix

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/internal/checker"
	"github.com/go-locker/locker/internal/faultproxy"
)

// envChild names the environment variable that makes the test binary a
// helper child; its value is the child's JSON-encoded childConfig.
const envChild = "LOCKER_FAULTMATRIX_CHILD"

// childConfig tells a helper child what to do.
type childConfig struct {
	Addr string
	Key  string
	TTL  time.Duration
	// Hold: lock once, read the resource, wait for the "finish" command,
	// write, unlock, exit. Otherwise contend: Goroutines handles lock,
	// read, work, write and unlock in a loop for Duration.
	Hold       bool
	ID         int // client id of the first handle; handle i is ID+i
	Goroutines int
	Duration   time.Duration
}

// event is a line a child writes on stdout. Times are on CLOCK_MONOTONIC
// (see now).
type event struct {
	Ev        string // ready, acq, done, rel, read, write, fail, exit
	ID        int
	Tok       uint64
	Call, Ret time.Duration
	OK        bool
	Err       string
	Lost      bool // rel: Unlock reported ErrLost or ErrNotHeld
}

// command is a line the parent writes on a child's stdin: a reply to a
// read or write request of handle Reply, or a command.
type command struct {
	Reply int
	OK    bool
	Cmd   string // "finish"
}

func serveChild(dial Dialer, opts []locker.Option) {
	v := os.Getenv(envChild)
	if v == "" {
		return
	}
	var cfg childConfig
	if err := json.Unmarshal([]byte(v), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "faultmatrix child:", err)
		os.Exit(2)
	}
	code := 0
	if err := runChild(cfg, dial, opts); err != nil {
		fmt.Fprintln(os.Stderr, "faultmatrix child:", err)
		code = 1
	}
	os.Exit(code)
}

// childIO is a child's end of the protocol.
type childIO struct {
	mu      sync.Mutex
	out     *json.Encoder
	replies map[int]chan bool
	finish  chan struct{}
}

func (c *childIO) send(ev event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.out.Encode(ev)
}

// ask sends a read or write request and waits for the parent's answer.
func (c *childIO) ask(ev event) bool {
	c.send(ev)
	return <-c.replies[ev.ID]
}

func runChild(cfg childConfig, dial Dialer, opts []locker.Option) error {
	d, closeFn, err := dial(cfg.Addr)
	if err != nil {
		return err
	}
	defer closeFn()
	n := max(cfg.Goroutines, 1)
	cio := &childIO{out: json.NewEncoder(os.Stdout), replies: map[int]chan bool{}, finish: make(chan struct{})}
	for i := range n {
		cio.replies[cfg.ID+i] = make(chan bool, 1)
	}
	go func() { // stdin: replies and commands; EOF ends the child
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			var c command
			if json.Unmarshal(sc.Bytes(), &c) != nil {
				continue
			}
			if c.Cmd == "finish" {
				close(cio.finish)
				continue
			}
			cio.replies[c.Reply] <- c.OK
		}
		os.Exit(3)
	}()
	opts = append([]locker.Option{locker.WithTTL(cfg.TTL), locker.WithErrorHandler(func(error) {})}, opts...)
	cio.send(event{Ev: "ready"})
	stop := time.Now().Add(cfg.Duration)
	var wg sync.WaitGroup
	for i := range n {
		id := cfg.ID + i
		m := locker.NewMutex(d, cfg.Key, opts...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first := true; first || (!cfg.Hold && time.Now().Before(stop)); first = false {
				if !cio.round(cfg, id, m) && cfg.Hold {
					return
				}
			}
		}()
	}
	wg.Wait()
	cio.send(event{Ev: "exit"})
	return nil
}

// round is one round of a child's goroutine id: it locks m, reports the
// grant, reads and writes the parent's register, unlocks m and reports
// the release. It reports false when the lock failed.
func (c *childIO) round(cfg childConfig, id int, m *locker.Mutex) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 4*cfg.TTL+time.Second)
	call := now()
	err := m.LockContext(ctx)
	ret := now()
	cancel()
	if err != nil {
		c.send(event{Ev: "fail", ID: id, Call: call, Ret: ret, Err: err.Error()})
		if !cfg.Hold {
			time.Sleep(cfg.TTL / 20)
		}
		return false
	}
	tok := uint64(m.Token())
	c.send(event{Ev: "acq", ID: id, Tok: tok, Call: call, Ret: ret})
	done := m.Done()
	watched := make(chan struct{})
	go func() {
		<-done
		c.send(event{Ev: "done", ID: id, Tok: tok, Ret: now()})
		close(watched)
	}()
	read := c.ask(event{Ev: "read", ID: id, Tok: tok})
	if cfg.Hold {
		<-c.finish
	} else {
		time.Sleep(time.Duration(int64(cfg.TTL/5) * int64(tok%7) / 7))
	}
	if read {
		c.ask(event{Ev: "write", ID: id, Tok: tok})
	}
	call = now()
	uerr := m.UnlockContext(context.Background())
	ret = now()
	<-watched
	ev := event{Ev: "rel", ID: id, Tok: tok, Call: call, Ret: ret, OK: uerr == nil}
	if uerr != nil {
		ev.Err = uerr.Error()
		ev.Lost = errors.Is(uerr, locker.ErrLost) || errors.Is(uerr, locker.ErrNotHeld)
	}
	c.send(ev)
	return true
}

// child is the parent's handle on a helper child.
type child struct {
	e     *env
	cmd   *exec.Cmd
	in    io.WriteCloser
	inMu  sync.Mutex
	net   Net           // the child's network faults
	acq   chan *holdRec // every hold the child reports
	exit  chan struct{} // closed when the child's stdout ends
	errMu sync.Mutex
	err   error
}

// startChild starts a helper child that reaches the server through a
// fault proxy of its own, and waits until it has dialed.
func (e *env) startChild(cfg childConfig) *child {
	e.t.Helper()
	p, err := faultproxy.New(e.tg.Addr())
	if err != nil {
		e.t.Fatalf("faultproxy: %v", err)
	}
	e.t.Cleanup(func() { _ = p.Close() })
	cfg.Addr, cfg.Key, cfg.TTL = p.Addr(), e.key, e.ttl
	b, _ := json.Marshal(cfg)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+string(b))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("helper child: %v", err)
	}
	net := e.proxyNet(p)
	c := &child{e: e, cmd: cmd, in: in, net: net, acq: make(chan *holdRec, 1024), exit: make(chan struct{})}
	ready := make(chan struct{})
	go c.read(out, ready)
	e.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = in.Close()
		select {
		case <-c.exit:
		case <-time.After(e.long()):
			_ = cmd.Process.Kill()
			<-c.exit
		}
		_ = cmd.Wait()
	})
	select {
	case <-ready:
	case <-c.exit:
		e.t.Fatalf("helper child ended before it was ready (does TestMain call faultmatrix.ServeChild?): %v", c.failure())
	case <-time.After(e.long()):
		e.t.Fatal("helper child never became ready")
	}
	return c
}

func (c *child) failure() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

func (c *child) reply(id int, ok bool) {
	b, _ := json.Marshal(command{Reply: id, OK: ok})
	c.inMu.Lock()
	defer c.inMu.Unlock()
	_, _ = c.in.Write(append(b, '\n'))
}

// finish tells a holding child to write and unlock.
func (c *child) finish() {
	b, _ := json.Marshal(command{Cmd: "finish"})
	c.inMu.Lock()
	defer c.inMu.Unlock()
	_, _ = c.in.Write(append(b, '\n'))
}

// read records the child's events in the iteration's history and answers
// its resource requests.
func (c *child) read(out io.Reader, ready chan struct{}) {
	defer close(c.exit)
	r := c.e.r
	holds := map[int]*holdRec{} // by handle id: the current hold
	pending := map[int][]int{}  // by handle id: what its read returned
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			continue // a stray line, such as the race detector's
		}
		switch ev.Ev {
		case "ready":
			close(ready)
		case "fail":
			r.addOp(checker.Op{Client: ev.ID, Kind: checker.Acquire, Call: ev.Call, Return: ev.Ret})
		case "acq":
			r.mu.Lock()
			h := &holdRec{client: ev.ID, token: ev.Tok, epoch: r.epoch, acquired: ev.Ret}
			r.holds = append(r.holds, h)
			r.addOpLocked(checker.Op{Client: ev.ID, Kind: checker.Acquire, Token: ev.Tok, OK: true, Call: ev.Call, Return: ev.Ret}, h.epoch)
			holds[ev.ID] = h
			r.mu.Unlock()
			c.acq <- h
		case "done":
			r.mu.Lock()
			if h := holds[ev.ID]; h != nil && h.token == ev.Tok {
				h.doneAt = ev.Ret
			}
			r.mu.Unlock()
		case "read":
			items, ok := r.res.Read(ev.ID, ev.Tok)
			pending[ev.ID] = items
			c.reply(ev.ID, ok)
		case "write":
			r.mu.Lock()
			r.next++
			v := r.next
			r.mu.Unlock()
			ok := r.res.Write(ev.ID, ev.Tok, append(pending[ev.ID], v))
			if ok {
				r.mu.Lock()
				r.acked = append(r.acked, v)
				r.mu.Unlock()
			}
			c.reply(ev.ID, ok)
		case "rel":
			r.mu.Lock()
			if h := holds[ev.ID]; h != nil && h.token == ev.Tok {
				h.unlockCall = ev.Call
				h.lost = h.doneAt != 0 && h.doneAt < ev.Call
				op := checker.Op{Client: ev.ID, Kind: checker.Release, Token: ev.Tok, Call: ev.Call, Return: ev.Ret, OK: ev.OK}
				op.Unknown = !ev.OK && !ev.Lost
				r.addOpLocked(op, h.epoch)
			}
			r.mu.Unlock()
		}
	}
	if err := sc.Err(); err != nil {
		c.errMu.Lock()
		c.err = err
		c.errMu.Unlock()
	}
}

// signal sends sig to the child.
func (c *child) signal(sig syscall.Signal) {
	c.e.t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		c.e.t.Fatalf("signal %v: %v", sig, err)
	}
}

// wait waits for the child to exit.
func (c *child) wait() {
	c.e.t.Helper()
	select {
	case <-c.exit:
	case <-time.After(c.e.long()):
		c.e.t.Fatal("helper child never exited")
	}
}

// clientPause has a helper child hold the key and stops it with SIGSTOP
// for longer than the TTL, as a long GC pause would, while a client of the
// parent waits. The waiter gets the key; when the child resumes it
// signals the loss within the slack, its write is refused by the fenced
// resource, and its Unlock reports the loss without touching the new
// holder's hold.
func clientPause(e *env) {
	ch := e.startChild(childConfig{Hold: true, ID: 100})
	var hc *holdRec
	select {
	case hc = <-ch.acq:
	case <-ch.exit:
		e.t.Fatal("helper child exited without the lock")
	case <-time.After(e.long()):
		e.t.Fatal("helper child never locked")
	}
	time.Sleep(e.ttl / 10) // let it read
	b := e.actor(1, e.client())
	gb := e.goLock(b)
	ch.signal(syscall.SIGSTOP)
	e.r.mu.Lock()
	hc.paused = true
	e.r.mu.Unlock()
	hb := <-gb
	if hb != nil {
		hb.read()
	}
	ch.signal(syscall.SIGCONT)
	resumed := now()
	deadline := time.Now().Add(e.long())
	for {
		e.r.mu.Lock()
		doneAt := hc.doneAt
		e.r.mu.Unlock()
		if doneAt != 0 {
			if d := doneAt - resumed; d > slack {
				e.violation("the paused child signalled its loss %v after it resumed", d)
			}
			break
		}
		if time.Now().After(deadline) {
			e.violation("the paused child never signalled its loss")
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	ch.finish()
	ch.wait()
	e.r.mu.Lock()
	lost := hc.unlockCall != 0
	e.r.mu.Unlock()
	if !lost {
		e.t.Error("the child did not report its Unlock")
	}
	if hb != nil && hb.lostYet() {
		e.violation("the paused child's Unlock ended the new holder's hold")
	}
	e.finish(hb, 0)
}

// contentionProcesses has three helper children, two handles each,
// contend for the key through fault proxies of their own while the
// nemesis black-holes, drops replies or resets one of them at a time.
func contentionProcesses(e *env) {
	var nets []Net
	var children []*child
	for i := range 3 {
		c := e.startChild(childConfig{ID: 10 * (i + 1), Goroutines: 2, Duration: 4 * e.ttl})
		children = append(children, c)
		nets = append(nets, c.net)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); e.nemesis(nets)(stop, newRand()) }()
	for _, c := range children {
		c.wait()
	}
	close(stop)
	wg.Wait()
	e.r.mu.Lock()
	n := len(e.r.holds)
	e.r.mu.Unlock()
	if n < 3 {
		e.t.Errorf("only %d holds among three processes", n)
	}
}
