package fleet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// controller is one `kiln serve` the benchmark runs (test/kilnproc does the
// same for tests; this one has no testing.TB, as the benchmark is a program).
type controller struct {
	name, addr string
	cmd        *exec.Cmd
	logPath    string
	done       chan struct{}
	peak       int64 // VmHWM in bytes, read before it was stopped or killed
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func startController(bin, dir, name, addr, db string, args []string) (*controller, error) {
	c := &controller{name: name, addr: addr, logPath: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	logf, err := os.Create(c.logPath)
	if err != nil {
		return nil, err
	}
	c.cmd = exec.Command(bin, append([]string{"serve", "--listen", addr, "--db", db, "--conductor", name}, args...)...)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	if err := c.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		_ = c.cmd.Wait()
		logf.Close()
		close(c.done)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-c.done:
			return nil, fmt.Errorf("%s exited at start: %s", name, tailFile(c.logPath, 2048))
		default:
		}
		if resp, err := http.Get("http://" + addr + "/v1/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.kill()
	return nil, fmt.Errorf("%s did not answer within 60 s: %s", name, tailFile(c.logPath, 2048))
}

func (c *controller) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// cpu is the CPU time (user and system) the process has used so far; zero
// once it is gone.
func (c *controller) cpu() time.Duration {
	if !c.alive() {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	return statCPU(string(b))
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times (100 on
// every Linux architecture Go builds for).
const clockTicks = 100

// statCPU is utime + stime from a /proc/<pid>/stat line: fields 14 and 15,
// counted after the command name, which is in parentheses and may hold
// spaces.
func statCPU(stat string) time.Duration {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(u+st) * time.Second / clockTicks
}

// peakRSS reads the process's peak resident set (VmHWM) while it runs.
func (c *controller) peakRSS() int64 {
	if c.alive() {
		if v, err := vmHWM(c.cmd.Process.Pid); err == nil {
			c.peak = v
		}
	}
	return c.peak
}

func vmHWM(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM in /proc/" + strconv.Itoa(pid) + "/status")
}

// kill ends it with SIGKILL, as a crash would.
func (c *controller) kill() {
	c.peakRSS()
	_ = c.cmd.Process.Kill()
	<-c.done
}

// stop ends it with SIGTERM (SIGKILL after 60 s).
func (c *controller) stop() {
	if !c.alive() {
		return
	}
	c.peakRSS()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(60 * time.Second):
		c.kill()
	}
}

func tailFile(path string, n int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return string(b)
}

// proxy spreads connections over the controllers round-robin and skips one
// that refuses them: the load balancer in front of several controllers, so
// that agents (told one ipa-api-url) survive a controller's death.
type proxy struct {
	ln       net.Listener
	backends []string
	next     atomic.Uint64
	wg       sync.WaitGroup
}

func startProxy(backends []string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, backends: backends}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve(c net.Conn) {
	defer c.Close()
	start := p.next.Add(1)
	var b net.Conn
	for i := range len(p.backends) {
		var err error
		if b, err = net.DialTimeout("tcp", p.backends[(int(start)+i)%len(p.backends)], 2*time.Second); err == nil {
			break
		}
	}
	if b == nil {
		return
	}
	defer b.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(b, c)
	go pipe(c, b)
	<-done
	<-done
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.wg.Wait()
}
