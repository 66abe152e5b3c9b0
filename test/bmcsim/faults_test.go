package bmcsim

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestFaultsValidate(t *testing.T) {
	for _, tc := range []struct {
		f  Faults
		ok bool
	}{
		{Faults{}, true},
		{Faults{Latency: time.Second, ErrorRate: 0.5, ErrorStatus: 503, DropRate: 1, SessionLimit: 2}, true},
		{Faults{Latency: -1}, false},
		{Faults{ErrorRate: 1.5}, false},
		{Faults{DropRate: -0.1}, false},
		{Faults{ErrorStatus: 404}, false},
		{Faults{SessionLimit: -1}, false},
		{Faults{SessionTTL: -time.Second}, false},
	} {
		if err := tc.f.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: err %v", tc.f, err)
		}
	}
	var f Faults
	if err := json.Unmarshal([]byte(`{"latency":"150ms","error_rate":0.25,"error_status":503,"session_ttl":"1m","task_hang":true,"unsticky_settings":["BootMode"]}`), &f); err != nil {
		t.Fatal(err)
	}
	if f.Latency != 150*time.Millisecond || f.ErrorRate != 0.25 || f.ErrorStatus != 503 || f.SessionTTL != time.Minute ||
		!f.TaskHang || len(f.UnstickySettings) != 1 || f.UnstickySettings[0] != "BootMode" {
		t.Errorf("decoded %+v", f)
	}
	b, _ := json.Marshal(f)
	var g Faults
	if err := json.Unmarshal(b, &g); err != nil || !reflect.DeepEqual(g, f) {
		t.Errorf("round trip %s → %+v %v", b, g, err)
	}
	if err := json.Unmarshal([]byte(`{"latency":"soon"}`), &f); err == nil {
		t.Error("bad latency accepted")
	}
}

func TestFaultInjection(t *testing.T) {
	lab := startLab(t, 1, "generic")
	b := lab.BMCs[0]
	u, p := b.Credentials()
	sys := b.URL + b.SystemPath(b.SystemIDs()[0])
	client := &http.Client{Timeout: 5 * time.Second}

	// Latency: a lower bound only, so it cannot flake on a slow machine.
	if err := b.SetFaults(Faults{Latency: 120 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if st, _, _ := do(t, client, "GET", sys, u, p, nil); st != 200 {
		t.Errorf("slow GET: %d", st)
	}
	if d := time.Since(start); d < 120*time.Millisecond {
		t.Errorf("latency fault not applied: %v", d)
	}

	// Every request fails with the configured 5xx and a Redfish body.
	_ = b.SetFaults(Faults{ErrorRate: 1, ErrorStatus: 503})
	st, _, m := do(t, client, "GET", sys, u, p, nil)
	if st != 503 {
		t.Errorf("error rate 1: %d", st)
	}
	if _, id := errorCode(t, m); !strings.HasSuffix(id, "GeneralError") {
		t.Errorf("5xx message %s", id)
	}

	// About half fail with rate 0.5 (bounds are ~7 sigma wide).
	_ = b.SetFaults(Faults{ErrorRate: 0.5})
	fails := 0
	for range 400 {
		if st, _, _ := do(t, client, "GET", b.URL+"/redfish/v1", "", "", nil); st == 500 {
			fails++
		}
	}
	if fails < 130 || fails > 270 {
		t.Errorf("error rate 0.5 gave %d/400 failures", fails)
	}

	// Dropped connections: the client sees a transport error, no response.
	_ = b.SetFaults(Faults{DropRate: 1})
	if resp, err := client.Get(b.URL + "/redfish/v1"); err == nil {
		resp.Body.Close()
		t.Errorf("dropped connection answered %d", resp.StatusCode)
	}

	// Faults can be cleared mid-test; counting includes faulted requests.
	_ = b.SetFaults(Faults{})
	b.ResetRequests()
	for range 7 {
		do(t, client, "GET", sys, u, p, nil)
	}
	if n := b.Requests(); n != 7 {
		t.Errorf("requests = %d, want 7", n)
	}
}

func TestSessionLimitAndExpiry(t *testing.T) {
	for _, tc := range []struct {
		personality string
		wantID      string
	}{
		{"generic", "SessionLimitExceeded"},
		{"idrac", "RAC0218"},
	} {
		t.Run(tc.personality, func(t *testing.T) {
			b := startLab(t, 1, tc.personality).BMCs[0]
			u, p := b.Credentials()
			_ = b.SetFaults(Faults{SessionLimit: 2})
			url := b.URL + "/redfish/v1/SessionService/Sessions"
			var tokens []string
			for range 2 {
				st, h, _ := do(t, nil, "POST", url, "", "", map[string]string{"UserName": u, "Password": p})
				if st != 201 {
					t.Fatalf("session: %d", st)
				}
				tokens = append(tokens, h.Get("X-Auth-Token"))
			}
			st, _, m := do(t, nil, "POST", url, "", "", map[string]string{"UserName": u, "Password": p})
			if st != 503 {
				t.Fatalf("third session: %d", st)
			}
			if _, id := errorCode(t, m); !strings.HasSuffix(id, tc.wantID) {
				t.Errorf("limit message %s, want %s", id, tc.wantID)
			}
			if tc.personality == "idrac" && !strings.Contains(m["error"].(map[string]any)["@Message.ExtendedInfo"].([]any)[0].(map[string]any)["Message"].(string), "maximum number of user sessions") {
				t.Errorf("iDRAC limit text: %v", m)
			}

			get := func(tok string) int {
				req, _ := http.NewRequest("GET", b.URL+"/redfish/v1/Systems", nil)
				req.Header.Set("X-Auth-Token", tok)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			if st := get(tokens[0]); st != 200 {
				t.Errorf("valid token: %d", st)
			}
			b.ExpireSessions()
			if st := get(tokens[0]); st != 401 {
				t.Errorf("expired token: %d", st)
			}
			if b.Sessions() != 0 {
				t.Errorf("sessions after expiry: %d", b.Sessions())
			}

			// A session TTL expires tokens by age.
			_ = b.SetFaults(Faults{SessionTTL: 500 * time.Millisecond})
			_, h, _ := do(t, nil, "POST", url, "", "", map[string]string{"UserName": u, "Password": p})
			if st := get(h.Get("X-Auth-Token")); st != 200 {
				t.Errorf("fresh token: %d", st)
			}
			time.Sleep(600 * time.Millisecond)
			if st := get(h.Get("X-Auth-Token")); st != 401 {
				t.Errorf("token past TTL: %d", st)
			}
		})
	}
}

func TestAdminAPI(t *testing.T) {
	lab := startLab(t, 3, "ilo")
	admin := httptest.NewServer(lab.AdminHandler())
	defer admin.Close()

	st, _, _ := do(t, nil, "PUT", admin.URL+"/bmcs/1/faults", "", "", `{"error_rate":1,"error_status":502}`)
	if st != 200 {
		t.Fatalf("put faults: %d", st)
	}
	if f := lab.BMCs[1].Faults(); f.ErrorRate != 1 || f.ErrorStatus != 502 {
		t.Errorf("faults not set: %+v", f)
	}
	if f := lab.BMCs[0].Faults(); !reflect.DeepEqual(f, Faults{}) {
		t.Errorf("other BMC changed: %+v", f)
	}
	if st, _, _ := do(t, nil, "GET", lab.BMCs[1].URL+"/redfish/v1", "", "", nil); st != 502 {
		t.Errorf("faulted BMC answered %d", st)
	}
	if st, _, _ := do(t, nil, "PUT", admin.URL+"/bmcs/1/faults", "", "", `{"error_rate":3}`); st != 400 {
		t.Errorf("invalid faults: %d", st)
	}
	if st, _, _ := do(t, nil, "PUT", admin.URL+"/bmcs/9/faults", "", "", `{}`); st != 404 {
		t.Errorf("unknown BMC: %d", st)
	}
	resp, err := http.Get(admin.URL + "/bmcs")
	if err != nil {
		t.Fatal(err)
	}
	var rows []AdminBMC
	if err := json.NewDecoder(resp.Body).Decode(&rows); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(rows) != 3 || rows[1].URL != lab.BMCs[1].URL || rows[1].Requests != 1 || rows[2].Systems[0] != "/redfish/v1/Systems/1" || rows[0].PowerState != "Off" {
		t.Errorf("rows %+v", rows)
	}
	if st, _, _ := do(t, nil, "POST", admin.URL+"/bmcs/0/expire-sessions", "", "", nil); st != 204 {
		t.Errorf("expire: %d", st)
	}
}

func TestSpread(t *testing.T) {
	for _, tc := range []struct {
		rate       float64
		n          uint64
		wantChosen uint64
		maxRun     int
	}{
		{0, 1000, 0, 0},
		{1, 1000, 1000, 1000},
		{0.4, 1000, 400, 1},
		{0.3, 1000, 300, 1},
		{0.5, 1000, 500, 1},
		{0.75, 1000, 750, 3},
		{0.05, 1000, 50, 1},
	} {
		var chosen uint64
		run, longest := 0, 0
		for i := uint64(1); i <= tc.n; i++ {
			if spread(i, tc.rate) {
				chosen++
				run++
				longest = max(longest, run)
			} else {
				run = 0
			}
		}
		if chosen != tc.wantChosen || longest != tc.maxRun {
			t.Errorf("rate %v over %d: chose %d (want %d), longest run %d (want %d)", tc.rate, tc.n, chosen, tc.wantChosen, longest, tc.maxRun)
		}
	}
}
