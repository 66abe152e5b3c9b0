package bmcsim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// qmpConn is one QMP connection to a QEMU process. QEMU serves one QMP client
// at a time, so this single connection carries both commands and events.
type qmpConn struct {
	conn    net.Conn
	mu      sync.Mutex // one command in flight
	replies chan qmpMessage
	done    chan struct{} // closed when the reader stops (QEMU exited)
}

type qmpMessage struct {
	Event  string          `json:"event"`
	Data   json.RawMessage `json:"data"`
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
	QMP json.RawMessage `json:"QMP"`
}

// dialQMP connects to the socket (retrying until it exists or ctx ends),
// negotiates capabilities and passes every event to onEvent.
func dialQMP(ctx context.Context, path string, onEvent func(name string, data json.RawMessage)) (*qmpConn, error) {
	var conn net.Conn
	for {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", path)
		if err == nil {
			conn = c
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to QMP socket %s: %w", path, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	q := &qmpConn{conn: conn, replies: make(chan qmpMessage, 1), done: make(chan struct{})}
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetReadDeadline(deadline)
	}
	if !sc.Scan() {
		conn.Close()
		return nil, fmt.Errorf("read QMP greeting from %s: %w", path, errors.Join(sc.Err(), errors.New("connection closed")))
	}
	_ = conn.SetReadDeadline(time.Time{})
	go func() {
		defer close(q.done)
		for sc.Scan() {
			var m qmpMessage
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			if m.Event != "" {
				onEvent(m.Event, m.Data)
				continue
			}
			if m.Return != nil || m.Error != nil {
				select {
				case q.replies <- m:
				default: // nobody waiting (timed-out command): drop
				}
			}
		}
	}()
	if err := q.execute(ctx, "qmp_capabilities", nil); err != nil {
		conn.Close()
		return nil, err
	}
	return q, nil
}

// execute runs one QMP command and waits for its reply. A command that ends
// QEMU — "quit", or "system_reset" under -no-reboot (qemu.go) — may see the
// connection close before its reply; that counts as success.
func (q *qmpConn) execute(ctx context.Context, cmd string, args any) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	req := map[string]any{"execute": cmd}
	if args != nil {
		req["arguments"] = args
	}
	b, _ := json.Marshal(req)
	if _, err := q.conn.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("send QMP %s: %w", cmd, err)
	}
	select {
	case m := <-q.replies:
		if m.Error != nil {
			return fmt.Errorf("QMP %s: %s: %s", cmd, m.Error.Class, m.Error.Desc)
		}
		return nil
	case <-q.done:
		if cmd == "quit" || cmd == "system_reset" {
			return nil
		}
		return fmt.Errorf("QMP %s: connection closed", cmd)
	case <-ctx.Done():
		return fmt.Errorf("QMP %s: %w", cmd, ctx.Err())
	}
}

func (q *qmpConn) close() { _ = q.conn.Close() }
