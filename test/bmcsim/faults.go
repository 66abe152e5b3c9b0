package bmcsim

import (
	"encoding/json"
	"fmt"
	"time"
)

// Faults are misbehaviours a Service injects into its answers. They can be
// changed at any time (Service.SetFaults), so a test can break a BMC mid-run.
type Faults struct {
	// Latency delays every request before it is handled.
	Latency time.Duration
	// ErrorRate is the fraction (0..1) of requests answered with ErrorStatus
	// and a Redfish GeneralError body instead of being handled. Failures are
	// spread evenly over the request sequence, not drawn at random, so a
	// client that retries enough always gets through and a test never
	// depends on luck (see spread).
	ErrorRate float64
	// ErrorStatus is the status for ErrorRate answers (default 500).
	ErrorStatus int
	// DropRate is the fraction (0..1) of requests whose connection is closed
	// without any response, spread evenly like ErrorRate.
	DropRate float64
	// SessionLimit caps concurrent sessions (0 = unlimited); creating one
	// more fails the way the personality's BMC fails.
	SessionLimit int
	// SessionTTL expires sessions this long after their creation (0 = never):
	// requests with an older X-Auth-Token get 401, as after a BMC's session
	// timeout. Service.ExpireSessions ends them all at once instead.
	SessionTTL time.Duration
	// TaskError makes every task fail halfway: TaskState Exception, and its
	// task monitor answers 500 (a BMC error mid-task).
	TaskError bool
	// TaskHang makes every task stop at 50% Running, never completing.
	TaskHang bool
	// UnstickySettings names BIOS attributes whose pending values the
	// firmware drops at the next boot instead of applying them.
	UnstickySettings []string
	// ManagerResetDowntime keeps the BMC unreachable (every connection
	// closed without an answer) this long on the service's Clock after a
	// #Manager.Reset, as while a real BMC reboots (0 = back at once).
	ManagerResetDowntime time.Duration
}

type faultsJSON struct {
	Latency              string   `json:"latency,omitempty"` // Go duration, "250ms"
	ErrorRate            float64  `json:"error_rate,omitempty"`
	ErrorStatus          int      `json:"error_status,omitempty"`
	DropRate             float64  `json:"drop_rate,omitempty"`
	SessionLimit         int      `json:"session_limit,omitempty"`
	SessionTTL           string   `json:"session_ttl,omitempty"` // Go duration
	TaskError            bool     `json:"task_error,omitempty"`
	TaskHang             bool     `json:"task_hang,omitempty"`
	UnstickySettings     []string `json:"unsticky_settings,omitempty"`
	ManagerResetDowntime string   `json:"manager_reset_downtime,omitempty"` // Go duration
}

// MarshalJSON writes the admin API form: latency as a Go duration string.
func (f Faults) MarshalJSON() ([]byte, error) {
	j := faultsJSON{ErrorRate: f.ErrorRate, ErrorStatus: f.ErrorStatus, DropRate: f.DropRate, SessionLimit: f.SessionLimit,
		TaskError: f.TaskError, TaskHang: f.TaskHang, UnstickySettings: f.UnstickySettings}
	if f.Latency != 0 {
		j.Latency = f.Latency.String()
	}
	if f.SessionTTL != 0 {
		j.SessionTTL = f.SessionTTL.String()
	}
	if f.ManagerResetDowntime != 0 {
		j.ManagerResetDowntime = f.ManagerResetDowntime.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the admin API form and validates it.
func (f *Faults) UnmarshalJSON(b []byte) error {
	var j faultsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	n := Faults{ErrorRate: j.ErrorRate, ErrorStatus: j.ErrorStatus, DropRate: j.DropRate, SessionLimit: j.SessionLimit,
		TaskError: j.TaskError, TaskHang: j.TaskHang, UnstickySettings: j.UnstickySettings}
	if j.Latency != "" {
		d, err := time.ParseDuration(j.Latency)
		if err != nil {
			return fmt.Errorf("parse latency: %w", err)
		}
		n.Latency = d
	}
	if j.SessionTTL != "" {
		d, err := time.ParseDuration(j.SessionTTL)
		if err != nil {
			return fmt.Errorf("parse session_ttl: %w", err)
		}
		n.SessionTTL = d
	}
	if j.ManagerResetDowntime != "" {
		d, err := time.ParseDuration(j.ManagerResetDowntime)
		if err != nil {
			return fmt.Errorf("parse manager_reset_downtime: %w", err)
		}
		n.ManagerResetDowntime = d
	}
	if err := n.Validate(); err != nil {
		return err
	}
	*f = n
	return nil
}

// Validate reports values that make no sense.
func (f Faults) Validate() error {
	switch {
	case f.Latency < 0:
		return fmt.Errorf("latency %v is negative", f.Latency)
	case f.ErrorRate < 0 || f.ErrorRate > 1:
		return fmt.Errorf("error rate %v is outside 0..1", f.ErrorRate)
	case f.DropRate < 0 || f.DropRate > 1:
		return fmt.Errorf("drop rate %v is outside 0..1", f.DropRate)
	case f.ErrorStatus != 0 && (f.ErrorStatus < 500 || f.ErrorStatus > 599):
		return fmt.Errorf("error status %d is not a 5xx", f.ErrorStatus)
	case f.SessionTTL < 0:
		return fmt.Errorf("session TTL %v is negative", f.SessionTTL)
	case f.SessionLimit < 0:
		return fmt.Errorf("session limit %d is negative", f.SessionLimit)
	case f.ManagerResetDowntime < 0:
		return fmt.Errorf("manager reset downtime %v is negative", f.ManagerResetDowntime)
	case f.TaskError && f.TaskHang:
		return fmt.Errorf("task error and task hang are exclusive")
	}
	for _, name := range f.UnstickySettings {
		if lookupBiosAttr(name) == nil {
			return fmt.Errorf("unsticky setting %q is not a BIOS attribute", name)
		}
	}
	return nil
}

// spread reports whether the n-th event (n ≥ 1) of a sequence is one of the
// rate-fraction chosen: the n-th is chosen when ⌊n·rate⌋ grows. Exactly
// rate of any long run is chosen, and a run of chosen events is never longer
// than ⌈rate/(1−rate)⌉, so a bounded retry loop always gets through.
func spread(n uint64, rate float64) bool {
	if rate <= 0 {
		return false
	}
	if rate >= 1 {
		return true
	}
	return uint64(float64(n)*rate) > uint64(float64(n-1)*rate)
}
