package redfish

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/kilnhq/kiln/controller/driver"
)

// DefaultTaskWait bounds the wait for a BMC task (a volume built, a
// firmware image applied) when the step gives no deadline.
const DefaultTaskWait = 30 * time.Minute

// taskPoll is the longest pause between two reads of a task monitor.
const taskPoll = 5 * time.Second

// taskDoc is the part of a Task the driver reads.
type taskDoc struct {
	ID              string `json:"Id"`
	TaskState       string `json:"TaskState"`
	TaskStatus      string `json:"TaskStatus"`
	PercentComplete *int   `json:"PercentComplete"`
	Messages        []struct {
		Message string `json:"Message"`
	} `json:"Messages"`
}

// accepted reads where an asynchronous operation's answer says to look:
// the task monitor of a 202, or "" when the BMC finished at once.
func accepted(resp *http.Response) string {
	defer drain(resp)
	if resp.StatusCode != http.StatusAccepted {
		return ""
	}
	return resp.Header.Get("Location")
}

// waitTask polls a task monitor until the task completes. A monitor
// answers 202 while the task runs and 200 (or 204) once it is done; a task
// that ends in Exception, Killed or Cancelled, an error answer, or a task
// still running at the deadline fails, named by what.
func (s *session) waitTask(ctx context.Context, monitor, what string, env driver.StepEnv) error {
	wait := env.Wait
	if wait == nil {
		wait = driver.Sleep
	}
	limit := env.Deadline
	if limit <= 0 {
		limit = DefaultTaskWait
	}
	for waited := time.Duration(0); ; {
		resp, err := s.do(ctx, http.MethodGet, monitor, nil, nil)
		if err != nil {
			return fmt.Errorf("%s: task %s: %w", what, monitor, err)
		}
		var t taskDoc
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		_ = json.Unmarshal(b, &t)
		switch t.TaskState {
		case "Exception", "Killed", "Cancelled", "Interrupted":
			return fmt.Errorf("%s: BMC %s task %s ended %s%s", what, s.endpoint, monitor, t.TaskState, taskMessage(t))
		}
		if resp.StatusCode != http.StatusAccepted && (t.TaskState == "" || t.TaskState == "Completed") {
			return nil
		}
		if waited >= limit {
			pct := ""
			if t.PercentComplete != nil {
				pct = fmt.Sprintf(" at %d%%", *t.PercentComplete)
			}
			return fmt.Errorf("%s: BMC %s task %s still %s%s after %s", what, s.endpoint, monitor, t.TaskState, pct, limit)
		}
		pause := retryAfter(resp.Header.Get("Retry-After"))
		if err := wait(ctx, pause); err != nil {
			return fmt.Errorf("%s: waiting for task %s: %w", what, monitor, err)
		}
		waited += pause
	}
}

// retryAfter is the pause a monitor asks for (Retry-After in seconds),
// between one second and taskPoll; taskPoll when it asks none.
func retryAfter(h string) time.Duration {
	n, err := strconv.Atoi(h)
	if err != nil || n <= 0 {
		return taskPoll
	}
	return min(time.Duration(n)*time.Second, taskPoll)
}

func taskMessage(t taskDoc) string {
	if len(t.Messages) == 0 || t.Messages[0].Message == "" {
		return ""
	}
	return ": " + t.Messages[0].Message
}
