package store

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

func TestSpliceDoc(t *testing.T) {
	edits := []docEdit{{"driver_internal_info", "agent_url", []byte(`"http://b"`)}, {key: "updated_at", val: []byte(`"T2"`)}}
	for _, tc := range []struct {
		name  string
		doc   string
		lined bool
		want  string // "" : not spliced
	}{
		{"both replaced", `{"a":1,"driver_internal_info":{"agent_url":"http://a","x":[1,{"y":"}"}]},"updated_at":null}`, false,
			`{"a":1,"driver_internal_info":{"agent_url":"http://b","x":[1,{"y":"}"}]},"updated_at":"T2"}`},
		{"order of members is kept", `{"updated_at":"T1","driver_internal_info":{"z":true,"agent_url":""}}`, false,
			`{"updated_at":"T2","driver_internal_info":{"z":true,"agent_url":"http://b"}}`},
		{"lined", "{\n\"driver_internal_info\":{\"agent_url\":\"a\\\"b\"},\n\"updated_at\":\"T1\"}", true,
			"{\n\"driver_internal_info\":{\"agent_url\":\"http://b\"},\n\"updated_at\":\"T2\"}"},
		{"sub-key missing", `{"driver_internal_info":{"agent_token":"t"},"updated_at":"T1"}`, false, ""},
		{"top-level key missing", `{"driver_internal_info":{"agent_url":"a"}}`, false, ""},
		{"object is null", `{"driver_internal_info":null,"updated_at":"T1"}`, false, ""},
		{"repeated member", `{"driver_internal_info":{"agent_url":"a"},"updated_at":"T1","updated_at":"T0"}`, false, ""},
		{"not compact", `{"driver_internal_info": {"agent_url":"a"}, "updated_at":"T1"}`, false, ""},
		{"lined read as compact", "{\n\"driver_internal_info\":{\"agent_url\":\"a\"},\n\"updated_at\":\"T1\"}", false, ""},
		{"compact read as lined", `{"driver_internal_info":{"agent_url":"a"},"updated_at":"T1"}`, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := spliceDoc([]byte(tc.doc), tc.lined, edits)
			if tc.want == "" {
				if ok {
					t.Fatalf("spliced %s", got)
				}
				return
			}
			if !ok || string(got) != tc.want {
				t.Fatalf("spliceDoc = %s, %v; want %s", got, ok, tc.want)
			}
		})
	}
}

// A steady heartbeat, whose keys the node holds already, is written by
// replacing their values: the document decodes to what json_set would
// have written, the masked copy is byte for byte the one derived from the
// new document (so GET passes it through), and a document changed since
// it was read is not overwritten.
func TestRecordAgentSplicesDocuments(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clock := newFakeClock()
		st := openT(t, dsn, Options{Now: clock.Now})
		ss := st.(*sqlStore)
		n := &proto.Node{UUID: "7c0c5f0e-1a2b-4c3d-8e9f-0a1b2c3d4e5f", Driver: "fake-hardware",
			ProvisionState: proto.StateDeployWait, Maintenance: true,
			DriverInfo: proto.Dict{"ipmi_password": "hunter2", "ipmi_address": "10.0.0.1"},
			DriverInternalInfo: proto.Dict{proto.InfoAgentToken: "tok", proto.InfoAgentURL: "http://10.0.0.5:9999",
				proto.InfoAgentVersion: "9", proto.InfoAgentLastHeartbeat: "2026-11-29T11:00:00Z", "note": "<a&b>"}}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		row := func() (doc string, masked sql.NullString) {
			t.Helper()
			if err := ss.queryRow(ctx, ss.rdb, "SELECT doc, masked_doc FROM nodes WHERE uuid = ?", n.UUID).Scan(&doc, &masked); err != nil {
				t.Fatal(err)
			}
			return doc, masked
		}
		heartbeat := func(version string, wantApplied bool) {
			t.Helper()
			v, err := st.AgentOf(ctx, n.UUID)
			if err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Second)
			set := []KeyValue{{proto.InfoAgentURL, "http://10.0.0.5:9999"}, {proto.InfoAgentVersion, version},
				{proto.InfoAgentLastHeartbeat, clock.Now().Format(time.RFC3339Nano)}}
			if ok, err := st.RecordAgent(ctx, v, set, true); err != nil || ok != wantApplied {
				t.Fatalf("RecordAgent = %v, %v; want %v", ok, err, wantApplied)
			}
		}
		check := func(version string) {
			t.Helper()
			doc, masked := row()
			if !masked.Valid {
				t.Fatal("masked_doc is NULL after a spliced heartbeat: reads would derive it")
			}
			want, err := maskedDoc([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if masked.String != string(want) {
				t.Fatalf("masked_doc\n%s\nwant (derived from doc)\n%s", masked.String, want)
			}
			got, err := st.GetNode(ctx, n.UUID)
			if err != nil {
				t.Fatal(err)
			}
			now := wireTime(clock.Now())
			dii := got.DriverInternalInfo
			if dii[proto.InfoAgentVersion] != version || dii[proto.InfoAgentLastHeartbeat] != clock.Now().Format(time.RFC3339Nano) ||
				dii[proto.InfoAgentToken] != "tok" || dii["note"] != "<a&b>" || got.DriverInfo["ipmi_password"] != "hunter2" ||
				!got.UpdatedAt.Equal(now.Time) || !got.ProvisionUpdatedAt.Equal(now.Time) {
				t.Fatalf("node after the heartbeat: dii %v, updated_at %v, provision_updated_at %v", dii, got.UpdatedAt, got.ProvisionUpdatedAt)
			}
			var upd, prov int64
			if err := ss.queryRow(ctx, ss.rdb, "SELECT updated_at, provision_updated_at FROM nodes WHERE uuid = ?", n.UUID).Scan(&upd, &prov); err != nil {
				t.Fatal(err)
			}
			if upd != now.UnixMicro() || prov != now.UnixMicro() {
				t.Errorf("columns updated_at %d provision_updated_at %d, want %d", upd, prov, now.UnixMicro())
			}
		}
		heartbeat("10&<x>", true)
		check("10&<x>")

		// A row without a masked copy gets one derived.
		if _, err := ss.exec(ctx, ss.wdb, "UPDATE nodes SET masked_doc = NULL WHERE uuid = ?", n.UUID); err != nil {
			t.Fatal(err)
		}
		heartbeat("11", true)
		check("11")

		// The document changed after it was read: the keys are set in
		// the current document (json_set), whose other changes are kept,
		// and the masked copy is left for the next read to derive.
		v, err := st.AgentOf(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.UpdateNode(ctx, n.UUID, func(n *proto.Node) error { n.Extra = proto.Dict{"k": "v"}; return nil }); err != nil {
			t.Fatal(err)
		}
		if ok, err := st.RecordAgent(ctx, v, []KeyValue{{proto.InfoAgentVersion, "12"}}, false); err != nil || !ok {
			t.Fatalf("RecordAgent on a changed document = %v, %v; want applied", ok, err)
		}
		if _, masked := row(); masked.Valid {
			t.Error("masked_doc kept after json_set changed the document")
		}
		got, err := st.GetNode(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Extra["k"] != "v" || got.DriverInternalInfo[proto.InfoAgentVersion] != "12" {
			t.Errorf("after a heartbeat on a changed document: extra %v, driver_internal_info %v", got.Extra, got.DriverInternalInfo)
		}
		if view, err := ss.GetNodeView(ctx, n.UUID); err != nil || !strings.Contains(string(view.Doc), `"agent_version":"12"`) {
			t.Errorf("GetNodeView = %s, %v", view.Doc, err)
		}
	})
}
