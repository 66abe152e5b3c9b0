package agent

import (
	"math/rand/v2"
	"time"
)

// Clock is the agent's source of time, injectable so tests of the lookup
// backoff and heartbeat cadence run on a fake clock.
type Clock interface {
	Now() time.Time
	// After fires once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// RealClock is the wall clock.
var RealClock Clock = realClock{}

// uniform returns a duration in [lo, hi).
func uniform(r *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Int64N(int64(hi-lo)))
}

// HeartbeatInterval is IPA's cadence: heartbeat_timeout × U(0.3, 0.6).
func HeartbeatInterval(r *rand.Rand, heartbeatTimeout time.Duration) time.Duration {
	return uniform(r, heartbeatTimeout*3/10, heartbeatTimeout*6/10)
}

// HeartbeatErrorInterval is the wait after a failed heartbeat: 5 × U(1, 2) s.
func HeartbeatErrorInterval(r *rand.Rand) time.Duration {
	return uniform(r, 5*time.Second, 10*time.Second)
}

// ForcedHeartbeatGap is IPA's floor between a heartbeat and a forced one
// (a command finished) when the controller is Ironic: the conductor that
// started the step may still hold the node's lock and would skip it.
const ForcedHeartbeatGap = 5 * time.Second

// LookupBackoff is the wait before lookup attempt n+1 after n failures
// (n ≥ 1): uniform in [1 s, min(60 s, 2^n s)] — randomized exponential.
func LookupBackoff(r *rand.Rand, n int) time.Duration {
	hi := 60 * time.Second
	if n < 6 {
		hi = time.Duration(1<<n) * time.Second
	}
	return uniform(r, time.Second, hi+time.Nanosecond)
}

// InspectionAttempts and InspectionRetryWait are IPA's schedule for posting
// inspection data: five attempts, waiting 1.5 s × 2^(n-1) clamped to 5–30 s
// after the n-th failure.
const InspectionAttempts = 5

// InspectionRetryWait is the wait after the n-th (n ≥ 1) failed post.
func InspectionRetryWait(n int) time.Duration {
	d := 1500 * time.Millisecond << min(n-1, 10)
	return max(5*time.Second, min(d, 30*time.Second))
}

// ConflictPause is the wait after the n-th (n ≥ 1) 409 from the lookup: 5, 10, then 30 s.
func ConflictPause(n int) time.Duration {
	switch {
	case n <= 1:
		return 5 * time.Second
	case n == 2:
		return 10 * time.Second
	}
	return 30 * time.Second
}
