package flowstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// Keys of driver_internal_info. The agent_* keys are Ironic's (clients and
// operators read them); the kiln_* keys are Kiln's own.
const (
	keyVersion           = "kiln_flow_version"
	keyManualCleanSteps  = "kiln_manual_clean_steps"
	keyUserDeploySteps   = "kiln_user_deploy_steps"
	keyServiceSteps      = "kiln_service_steps"
	keyProgress          = "kiln_progress"
	keyImageArgs         = "kiln_image_args"
	keyTokenIssued       = "kiln_agent_token_issued_at"
	keyLastBMCCheck      = proto.InfoLastBMCCheck
	keyManagementRequest = proto.InfoManagementRequest
	keyManagementResult  = proto.InfoManagementResult
)

// Of decodes n's driver_internal_info. On error the returned state still
// holds every field that decoded; the others stay in the record unchanged.
func Of(n *proto.Node) (State, error) { return Decode(n.DriverInternalInfo) }

// Update decodes n's state, applies fn and stores the result back in n.
// Values that do not decode are kept as they are (fn may overwrite them).
func Update(n *proto.Node, fn func(s *State)) {
	s, _ := Of(n)
	fn(&s)
	n.DriverInternalInfo = Encode(s)
}

// Part is a group of State fields that a hot path may read or write alone
// (an agent heartbeat, a scan for nodes with work, a metrics scrape), so
// that it does not decode the step plan and the cached steps it never uses.
type Part uint

const (
	// PartAgent is Agent.
	PartAgent Part = 1 << iota
	// PartWork is what the API hands to the conductor: Request,
	// BootDevice(Pending), PowerTimeout, HeartbeatPending,
	// InspectionPending, ManagementRequest and ManagementResult.
	PartWork
	// PartProgress is Progress.
	PartProgress
	// PartBMC is LastBMCCheck.
	PartBMC
	// PartPlan is everything else: the plan, the steps, image arguments.
	PartPlan

	// All is every field.
	All = PartAgent | PartWork | PartProgress | PartBMC | PartPlan
)

// field is how one key maps to a State field.
type field struct {
	key    string
	decode func(s *State, v any) error
	encode func(s *State) (any, bool)
	part   Part
}

var fields = []field{
	str(proto.InfoAgentURL, func(s *State) *string { return &s.Agent.URL }),
	str(proto.InfoAgentVersion, func(s *State) *string { return &s.Agent.Version }),
	str(proto.InfoAgentVerifyCA, func(s *State) *string { return &s.Agent.VerifyCA }),
	str(proto.InfoAgentToken, func(s *State) *string { return &s.Agent.Token }),
	flag(proto.InfoAgentTokenPregen, func(s *State) *bool { return &s.Agent.TokenPregenerated }),
	stamp(proto.InfoAgentLastHeartbeat, func(s *State) *time.Time { return &s.Agent.LastHeartbeat }),
	stamp(keyTokenIssued, func(s *State) *time.Time { return &s.Agent.TokenIssued }),
	jsonMap(proto.InfoCachedCleanSteps, func(s *State) *map[string][]proto.Step { return &s.CachedCleanSteps }),
	jsonMap(proto.InfoCachedDeploySteps, func(s *State) *map[string][]proto.Step { return &s.CachedDeploySteps }),
	jsonMap(proto.InfoCachedServiceSteps, func(s *State) *map[string][]proto.Step { return &s.CachedServiceSteps }),
	jsonMap(proto.InfoCachedStepsVersions, func(s *State) *map[string]string { return &s.CachedStepsVersions }),
	generic(ptr(proto.InfoRequest, func(s *State) **Request { return &s.Request })),
	ptr(proto.InfoBootDevice, func(s *State) **BootDevice { return &s.BootDevice }),
	flag(proto.InfoBootDevicePending, func(s *State) *bool { return &s.BootDevicePending }),
	integer(proto.InfoPowerTimeout, func(s *State) *int { return &s.PowerTimeout }, false),
	stamp(proto.InfoHeartbeatPending, func(s *State) *time.Time { return &s.HeartbeatPending }),
	flag(proto.InfoInspectionPending, func(s *State) *bool { return &s.InspectionPending }),
	generic(steps(proto.InfoSteps, func(s *State) *[]proto.StepCall { return &s.Steps })),
	integer(proto.InfoStepIndex, func(s *State) *int { return &s.StepIndex }, true),
	{key: proto.InfoStepSent,
		decode: func(s *State, v any) error { return decodeValue(v, &s.StepSent) },
		encode: func(s *State) (any, bool) { return s.StepSent, s.StepSent || s.Steps != nil }},
	stamp(proto.InfoStepSentAt, func(s *State) *time.Time { return &s.StepSentAt }),
	generic(steps(keyManualCleanSteps, func(s *State) *[]proto.StepCall { return &s.ManualCleanSteps })),
	generic(steps(keyUserDeploySteps, func(s *State) *[]proto.StepCall { return &s.UserDeploySteps })),
	generic(steps(keyServiceSteps, func(s *State) *[]proto.StepCall { return &s.ServiceSteps })),
	generic(ptr(keyImageArgs, func(s *State) **proto.PrepareImageParams { return &s.ImageArgs })),
	ptr(keyProgress, func(s *State) **Progress { return &s.Progress }),
	ptr(proto.InfoPartitionUUIDs, func(s *State) **proto.PartitionUUIDs { return &s.PartitionUUIDs }),
	{key: keyLastBMCCheck, decode: decodeBMCCheck, encode: encodeBMCCheck},
	ptr(keyManagementRequest, func(s *State) **proto.ManagementRequest { return &s.ManagementRequest }),
	ptr(keyManagementResult, func(s *State) **proto.ManagementResult { return &s.ManagementResult }),
}

// Decode reads a driver_internal_info dictionary, as stored or as built in
// memory. Old records migrate: a missing version is version 0, numbers
// stored as float64 become integers. A value of the wrong type is an error
// naming its key; the value is kept for Encode.
func Decode(d proto.Dict) (State, error) {
	var s State
	var errs []error
	for k, v := range d {
		if k == keyVersion {
			var ver int
			if err := decodeInt(v, &ver); err != nil {
				errs = append(errs, fmt.Errorf("driver_internal_info.%s: %w", k, err))
			} else if ver > Version {
				errs = append(errs, fmt.Errorf("driver_internal_info.%s: version %d is newer than this Kiln's %d", k, ver, Version))
			} else {
				s.Version = ver
			}
			continue
		}
		f, known := fieldByKey[k]
		if known && v != nil {
			if err := f.decode(&s, v); err != nil {
				errs = append(errs, fmt.Errorf("driver_internal_info.%s: %w", k, err))
				known = false
			}
		}
		if !known {
			if s.extra == nil {
				s.extra = map[string]any{}
			}
			s.extra[k] = v
		}
	}
	return s, errors.Join(errs...)
}

// Encode is the driver_internal_info dictionary of s: every set field under
// its key, and the keys Decode did not know. An empty state is an empty
// dictionary (a new node's driver_internal_info is {}).
func Encode(s State) proto.Dict {
	d := proto.Dict{}
	maps.Copy(d, s.extra)
	known := false
	for _, f := range fields {
		if v, ok := f.encode(&s); ok {
			d[f.key] = v
			known = true
		} else if _, kept := s.extra[f.key]; !kept {
			delete(d, f.key)
		}
	}
	if known {
		d[keyVersion] = Version
	}
	return d
}

// partOf groups the keys; a key not named is in PartPlan.
var partOf = map[string]Part{
	proto.InfoAgentURL: PartAgent, proto.InfoAgentVersion: PartAgent, proto.InfoAgentVerifyCA: PartAgent,
	proto.InfoAgentToken: PartAgent, proto.InfoAgentTokenPregen: PartAgent, proto.InfoAgentLastHeartbeat: PartAgent,
	keyTokenIssued:    PartAgent,
	proto.InfoRequest: PartWork, proto.InfoBootDevice: PartWork, proto.InfoBootDevicePending: PartWork,
	proto.InfoPowerTimeout: PartWork, proto.InfoHeartbeatPending: PartWork, proto.InfoInspectionPending: PartWork,
	keyManagementRequest: PartWork, keyManagementResult: PartWork,
	keyProgress:     PartProgress,
	keyLastBMCCheck: PartBMC,
}

var fieldByKey = func() map[string]field {
	m := map[string]field{}
	for i := range fields {
		fields[i].part = PartPlan
		if p, ok := partOf[fields[i].key]; ok {
			fields[i].part = p
		}
		m[fields[i].key] = fields[i]
	}
	return m
}()

// Read decodes only the parts of n's record named: the other fields stay
// zero. Errors are Decode's, for those parts.
func Read(n *proto.Node, parts Part) (State, error) {
	var s State
	var errs []error
	for k, v := range n.DriverInternalInfo {
		f, known := fieldByKey[k]
		if !known || f.part&parts == 0 || v == nil {
			continue
		}
		if err := f.decode(&s, v); err != nil {
			errs = append(errs, fmt.Errorf("driver_internal_info.%s: %w", k, err))
			if s.extra == nil {
				s.extra = map[string]any{}
			}
			s.extra[k] = v
		}
	}
	return s, errors.Join(errs...)
}

// Write stores the parts of s named into n's record, in place, and leaves
// every other key as it is. With Read it is a cheap Update of those parts.
func Write(n *proto.Node, s State, parts Part) {
	if n.DriverInternalInfo == nil {
		n.DriverInternalInfo = proto.Dict{}
	}
	d := n.DriverInternalInfo
	for _, f := range fields {
		if f.part&parts == 0 {
			continue
		}
		if v, ok := f.encode(&s); ok {
			d[f.key] = v
			d[keyVersion] = Version
		} else if _, bad := s.extra[f.key]; !bad {
			delete(d, f.key) // a value Read could not decode stays
		}
	}
}

func str(key string, at func(*State) *string) field {
	return field{key: key,
		decode: func(s *State, v any) error { return decodeValue(v, at(s)) },
		encode: func(s *State) (any, bool) { p := at(s); return *p, *p != "" }}
}

func flag(key string, at func(*State) *bool) field {
	return field{key: key,
		decode: func(s *State, v any) error { return decodeValue(v, at(s)) },
		encode: func(s *State) (any, bool) { p := at(s); return *p, *p }}
}

// integer reads whole numbers however they were stored (int, float64 after
// a JSON round trip, json.Number). withSteps also writes 0 while a plan
// exists, as the step index always was.
func integer(key string, at func(*State) *int, withSteps bool) field {
	return field{key: key,
		decode: func(s *State, v any) error { return decodeInt(v, at(s)) },
		encode: func(s *State) (any, bool) { p := at(s); return *p, *p != 0 || (withSteps && s.Steps != nil) }}
}

func stamp(key string, at func(*State) *time.Time) field {
	return field{key: key,
		decode: func(s *State, v any) error {
			str, ok := v.(string)
			if !ok {
				return fmt.Errorf("want a timestamp string, got %s", typeName(v))
			}
			for _, layout := range []string{time.RFC3339Nano, proto.TimeLayout} {
				if t, err := time.Parse(layout, str); err == nil {
					*at(s) = t
					return nil
				}
			}
			return fmt.Errorf("%q is not an RFC 3339 timestamp", str)
		},
		encode: func(s *State) (any, bool) {
			t := *at(s)
			return t.UTC().Format(time.RFC3339Nano), !t.IsZero()
		}}
}

func steps(key string, at func(*State) *[]proto.StepCall) field {
	return field{key: key,
		decode: func(s *State, v any) error { return decodeValue(v, at(s)) },
		encode: func(s *State) (any, bool) { p := at(s); return *p, *p != nil }}
}

func jsonMap[V any](key string, at func(*State) *map[string]V) field {
	return field{key: key,
		decode: func(s *State, v any) error { return decodeValue(v, at(s)) },
		encode: func(s *State) (any, bool) { p := at(s); return *p, *p != nil }}
}

func ptr[T any](key string, at func(*State) **T) field {
	return field{key: key,
		decode: func(s *State, v any) error {
			var t T
			if err := decodeValue(v, &t); err != nil {
				return err
			}
			*at(s) = &t
			return nil
		},
		encode: func(s *State) (any, bool) { p := *at(s); return p, p != nil }}
}

// generic makes f store its value in JSON's generic form (maps, slices,
// float64s) rather than as a Go value: step arguments and write_image's
// arguments may hold secrets (a config drive, a password), and the masking
// of API answers and logs sees into generic values only.
func generic(f field) field {
	enc := f.encode
	f.encode = func(s *State) (any, bool) {
		v, ok := enc(s)
		if !ok {
			return nil, false
		}
		b, err := json.Marshal(v)
		if err != nil {
			return v, true
		}
		var g any
		if err := json.Unmarshal(b, &g); err != nil {
			return v, true
		}
		return g, true
	}
	return f
}

// bmcCheck is the stored form of a proto.BMCCheck; "ok" lets a reader that
// knows nothing of errors tell success from failure.
type bmcCheck struct {
	At        string `json:"at"`
	Operation string `json:"operation"`
	OK        bool   `json:"ok"`
	Error     string `json:"error,omitempty"`
}

func decodeBMCCheck(s *State, v any) error {
	var c bmcCheck
	if err := decodeValue(v, &c); err != nil {
		return err
	}
	at, err := time.Parse(time.RFC3339Nano, c.At)
	if err != nil {
		return fmt.Errorf("at: %q is not an RFC 3339 timestamp", c.At)
	}
	b := proto.BMCCheck{At: at, Operation: c.Operation, Error: c.Error}
	if !c.OK && b.Error == "" {
		b.Error = "unknown error"
	}
	s.LastBMCCheck = &b
	return nil
}

func encodeBMCCheck(s *State) (any, bool) {
	b := s.LastBMCCheck
	if b == nil {
		return nil, false
	}
	return bmcCheck{At: b.At.UTC().Format(time.RFC3339Nano), Operation: b.Operation, OK: b.Error == "", Error: b.Error}, true
}

// decodeValue converts v (a Go value or its generic JSON form) into out.
func decodeValue(v any, out any) error {
	switch o := out.(type) {
	case *string:
		if x, ok := v.(string); ok {
			*o = x
			return nil
		}
		return fmt.Errorf("want a string, got %s", typeName(v))
	case *bool:
		if x, ok := v.(bool); ok {
			*o = x
			return nil
		}
		return fmt.Errorf("want a boolean, got %s", typeName(v))
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field != "" {
				return fmt.Errorf("%s: want %s, got a JSON %s", te.Field, te.Type, te.Value)
			}
			return fmt.Errorf("want %s, got a JSON %s", te.Type, te.Value)
		}
		return err
	}
	return nil
}

func decodeInt(v any, out *int) error {
	var f float64
	switch x := v.(type) {
	case int:
		*out = x
		return nil
	case int64:
		f = float64(x)
	case float64:
		f = x
	case json.Number:
		if i, err := x.Int64(); err == nil {
			*out = int(i)
			return nil
		}
		var err error
		if f, err = x.Float64(); err != nil {
			return fmt.Errorf("want a whole number, got %q", x.String())
		}
	default:
		return fmt.Errorf("want a whole number, got %s", typeName(v))
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<31 {
		return fmt.Errorf("want a whole number, got %v", f)
	}
	*out = int(f)
	return nil
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64, int, int64, json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
