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
	// and a Redfish GeneralError body instead of being handled.
	ErrorRate float64
	// ErrorStatus is the status for ErrorRate answers (default 500).
	ErrorStatus int
	// DropRate is the fraction (0..1) of requests whose connection is closed
	// without any response.
	DropRate float64
	// SessionLimit caps concurrent sessions (0 = unlimited); creating one
	// more fails the way the personality's BMC fails.
	SessionLimit int
	// SessionTTL expires sessions this long after their creation (0 = never):
	// requests with an older X-Auth-Token get 401, as after a BMC's session
	// timeout. Service.ExpireSessions ends them all at once instead.
	SessionTTL time.Duration
}

type faultsJSON struct {
	Latency      string  `json:"latency,omitempty"` // Go duration, "250ms"
	ErrorRate    float64 `json:"error_rate,omitempty"`
	ErrorStatus  int     `json:"error_status,omitempty"`
	DropRate     float64 `json:"drop_rate,omitempty"`
	SessionLimit int     `json:"session_limit,omitempty"`
	SessionTTL   string  `json:"session_ttl,omitempty"` // Go duration
}

// MarshalJSON writes the admin API form: latency as a Go duration string.
func (f Faults) MarshalJSON() ([]byte, error) {
	j := faultsJSON{ErrorRate: f.ErrorRate, ErrorStatus: f.ErrorStatus, DropRate: f.DropRate, SessionLimit: f.SessionLimit}
	if f.Latency != 0 {
		j.Latency = f.Latency.String()
	}
	if f.SessionTTL != 0 {
		j.SessionTTL = f.SessionTTL.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the admin API form and validates it.
func (f *Faults) UnmarshalJSON(b []byte) error {
	var j faultsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	n := Faults{ErrorRate: j.ErrorRate, ErrorStatus: j.ErrorStatus, DropRate: j.DropRate, SessionLimit: j.SessionLimit}
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
	}
	return nil
}
