package testtool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// WaitDelay is how long Wait waits, after the child has exited or was
// killed, for descendants that escaped the kill (a daemon that called
// setsid) to close the child's output, before it closes the pipes itself.
const WaitDelay = 10 * time.Second

// Command is exec.CommandContext for the long children tests start — builds
// (go build, scripts/fetch-kernel.sh, initramfs/build.sh, mkimage.sh) and
// QEMU — whose own children must not outlive a timeout. exec.CommandContext
// kills only the direct child: a shell script's go or mkuimage, or go's
// compiler, went on running and loading the machine after the test had
// failed. Here the child starts in a process group of its own, and when ctx
// ends the whole group is killed (SIGKILL, as exec.CommandContext does for
// the one process: a build needs no graceful stop, and SIGTERM may be
// ignored). The error a caller gets is then the kill's; context.Cause(ctx)
// says which time limit ran out.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd.Process) }
	cmd.WaitDelay = WaitDelay
	return cmd
}

// killGroup kills the process group p leads (Setpgid made its ID p's PID).
func killGroup(p *os.Process) error {
	err := syscall.Kill(-p.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone // the group is gone already: nothing to cancel
	}
	return err
}

// BuildTimeout is the time limit of one build a test or TestMain runs (go
// build of a binary, a test image): a safety net for a loaded 2-core
// machine, where a cold go build of kiln took over 10 minutes and the
// initramfs 19, not a measurement. Makefile's TEST_TIMEOUT stays above it.
const BuildTimeout = 30 * time.Minute

// WithTimeout is context.WithTimeoutCause with a cause that names the limit
// ("the build timeout (30m0s) ran out"), so that a failure says which of a
// test's limits ran out.
func WithTimeout(parent context.Context, name string, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(parent, d, fmt.Errorf("the %s timeout (%v) ran out", name, d))
}

// Why is the error to report for a command run under ctx: the cause of
// ctx's end (which limit ran out) when it ended, rather than the "signal:
// killed" the kill left in err; otherwise err.
func Why(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && err != nil {
		return cause
	}
	return err
}
