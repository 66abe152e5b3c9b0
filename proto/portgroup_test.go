package proto

import (
	"encoding/json"
	"testing"
)

func TestLooseBool(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    bool
		wantErr bool
	}{
		{`true`, true, false}, {`false`, false, false},
		{`"True"`, true, false}, {`"yes"`, true, false}, {`"1"`, true, false}, {`"ON"`, true, false},
		{`"False"`, false, false}, {`"no"`, false, false}, {`"0"`, false, false}, {`"off"`, false, false},
		{`"maybe"`, false, true}, {`""`, false, true}, {`1`, false, true}, {`null`, false, true}, {`{}`, false, true},
	} {
		var b LooseBool = !LooseBool(c.want)
		err := json.Unmarshal([]byte(c.in), &b)
		if (err != nil) != c.wantErr {
			t.Errorf("%s: error %v, want error %v", c.in, err, c.wantErr)
			continue
		}
		if err == nil && bool(b) != c.want {
			t.Errorf("%s: %v, want %v", c.in, b, c.want)
		}
	}
	// Written as a JSON boolean.
	out, err := json.Marshal(struct {
		B LooseBool `json:"b"`
	}{true})
	if err != nil || string(out) != `{"b":true}` {
		t.Errorf("marshal: %s %v", out, err)
	}
}
