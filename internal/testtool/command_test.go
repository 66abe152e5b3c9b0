package testtool

import (
	"bufio"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// grandchildScript starts a grandchild that ignores SIGTERM and sleeps, prints
// its PID and waits for it: a shell script whose build tool outlives it.
const grandchildScript = `(trap '' TERM; exec sleep 600) & echo $!; wait`

// TestCommandKillsGrandchildren: when the context ends, Command's child and
// the grandchild it started (which ignores SIGTERM) are both gone. A plain
// exec.CommandContext, the control case, leaves the grandchild running, so
// the test can tell the two apart. The test waits on the grandchild itself
// (this process is made its reaper), not on time; the deadline only keeps a
// broken kill from hanging the test.
func TestCommandKillsGrandchildren(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip(Missing("sh", err))
	}
	// Orphans are re-parented to this process instead of init, so that it
	// can wait for the grandchild and see how it ended.
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		t.Fatalf("prctl(PR_SET_CHILD_SUBREAPER): %v", e)
	}
	for _, tc := range []struct {
		name     string
		command  func(context.Context, string, ...string) *exec.Cmd
		wantKill bool
	}{
		{"Command", Command, true},
		{"exec.CommandContext", exec.CommandContext, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			cmd := tc.command(ctx, "sh", "-c", grandchildScript)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				t.Fatalf("reading the grandchild's PID: %v", err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(line))
			if err != nil {
				t.Fatalf("grandchild PID %q: %v", line, err)
			}
			exited := make(chan syscall.WaitStatus, 1)
			cancel()
			if err := cmd.Wait(); err == nil {
				t.Errorf("Wait after cancel = nil, want the kill's error")
			}
			// The child is reaped: the grandchild, if alive, is now this
			// process's child, and wait4 returns when it ends.
			go func() {
				var ws syscall.WaitStatus
				for {
					_, err := syscall.Wait4(pid, &ws, 0, nil)
					if err != syscall.EINTR {
						break
					}
				}
				exited <- ws
			}()
			if !tc.wantKill {
				// Alive right after Wait: nothing signalled it. Then end it.
				if err := syscall.Kill(pid, 0); err != nil {
					t.Fatalf("grandchild %d not running after a plain CommandContext's cancel: %v", pid, err)
				}
				syscall.Kill(pid, syscall.SIGKILL)
				<-exited
				return
			}
			select {
			case ws := <-exited:
				if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
					t.Errorf("grandchild %d ended with %v, want killed by SIGKILL", pid, ws)
				}
			case <-time.After(2 * time.Minute): // a safety net, not a measurement
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("grandchild %d still running 2 minutes after the cancel", pid)
			}
		})
	}
}

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

// TestWhyNamesTheLimit: a command killed by a named limit reports that
// limit; one that failed on its own reports its own error.
func TestWhyNamesTheLimit(t *testing.T) {
	ctx, cancel := WithTimeout(t.Context(), "build", 0)
	defer cancel()
	<-ctx.Done()
	err := Command(ctx, "sh", "-c", "exit 0").Run()
	if err == nil {
		t.Fatal("Run under an ended context = nil, want an error")
	}
	if got, want := Why(ctx, err).Error(), "the build timeout (0s) ran out"; got != want {
		t.Errorf("Why = %q, want %q", got, want)
	}

	err = Command(t.Context(), "sh", "-c", "exit 3").Run()
	if got := Why(t.Context(), err); got != err {
		t.Errorf("Why for a live context = %v, want the command's own %v", got, err)
	}
	if Why(ctx, nil) != nil {
		t.Errorf("Why(ended ctx, nil) != nil")
	}
}
