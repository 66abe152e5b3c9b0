package flowstate

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// BenchmarkHeartbeatUpdate is what an agent heartbeat costs in the codec:
// decode a stored mid-deploy record, record the heartbeat, encode.
func BenchmarkHeartbeatUpdate(b *testing.B) {
	var plan []proto.StepCall
	cached := map[string][]proto.Step{}
	for i := range 12 {
		s := proto.Step{Step: "step" + string(rune('a'+i)), Interface: "deploy", Priority: 10 * i}
		plan = append(plan, proto.StepCall{Step: s, Args: map[string]any{"n": i}})
		cached["GenericHardwareManager"] = append(cached["GenericHardwareManager"], s)
	}
	s := State{Agent: Agent{URL: "http://192.0.2.1:9999", Token: "t", LastHeartbeat: time.Now()},
		CachedDeploySteps: cached, CachedStepsVersions: map[string]string{"GenericHardwareManager": "1"},
		Steps: plan, StepIndex: 3, StepSent: true, StepSentAt: time.Now()}
	raw, _ := json.Marshal(Encode(s))
	var stored proto.Dict
	if err := json.Unmarshal(raw, &stored); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		n := &proto.Node{DriverInternalInfo: stored}
		fs, err := Of(n)
		if err != nil {
			b.Fatal(err)
		}
		fs.Agent.LastHeartbeat, fs.HeartbeatPending = time.Now(), time.Now()
		n.DriverInternalInfo = Encode(fs)
	}
}

// BenchmarkHeartbeatParts is the same through Read and Write of the parts a
// heartbeat uses, as the API's heartbeat handler does.
func BenchmarkHeartbeatParts(b *testing.B) {
	var plan []proto.StepCall
	for i := range 12 {
		plan = append(plan, proto.StepCall{Step: proto.Step{Step: "s" + string(rune('a'+i)), Interface: "deploy"}, Args: map[string]any{"n": i}})
	}
	raw, _ := json.Marshal(Encode(State{Agent: Agent{URL: "http://192.0.2.1:9999", Token: "t"}, Steps: plan, StepSent: true}))
	var stored proto.Dict
	if err := json.Unmarshal(raw, &stored); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		n := &proto.Node{DriverInternalInfo: stored}
		fs, err := Read(n, PartAgent|PartWork)
		if err != nil {
			b.Fatal(err)
		}
		fs.Agent.LastHeartbeat, fs.HeartbeatPending = time.Now(), time.Now()
		Write(n, fs, PartAgent|PartWork)
	}
}
