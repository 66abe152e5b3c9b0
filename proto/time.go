package proto

import (
	"fmt"
	"strings"
	"time"
)

// Time is a timestamp in Ironic's wire form, "2016-08-18T22:28:49.946416+00:00":
// always UTC, microseconds, an explicit offset. gophercloud parses it into
// time.Time, so the layout matters.
type Time struct{ time.Time }

// TimeLayout is Ironic's timestamp layout.
const TimeLayout = "2006-01-02T15:04:05.000000-07:00"

// Now returns the current time truncated to Ironic's microsecond precision.
func Now() *Time { return &Time{time.Now().UTC().Truncate(time.Microsecond)} }

// MarshalJSON writes the timestamp in Ironic's layout.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + t.UTC().Format(TimeLayout) + `"`), nil
}

// UnmarshalJSON accepts Ironic's layout and plain RFC 3339.
func (t *Time) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	for _, layout := range []string{TimeLayout, time.RFC3339Nano, "2006-01-02T15:04:05.999999"} {
		if v, err := time.Parse(layout, s); err == nil {
			t.Time = v.UTC()
			return nil
		}
	}
	return fmt.Errorf("invalid timestamp %q", s)
}
