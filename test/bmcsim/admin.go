package bmcsim

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
)

// AdminBMC is one row of the admin API's BMC list.
type AdminBMC struct {
	Index       int      `json:"index"`
	URL         string   `json:"url"`
	Personality string   `json:"personality"`
	Username    string   `json:"username"`
	Password    string   `json:"password"`
	Systems     []string `json:"systems"` // Redfish paths of the systems
	PowerState  string   `json:"power_state"`
	Requests    uint64   `json:"requests"`
	Sessions    int      `json:"sessions"`
	Faults      Faults   `json:"faults"`
}

// AdminHandler serves a small JSON API to inspect and break the lab's BMCs
// at run time (for the kiln-bmcsim command; tests use the Go API):
//
//	GET    /bmcs                          list of AdminBMC
//	GET    /bmcs/{i}                      one AdminBMC
//	PUT    /bmcs/{i}/faults               body: {"latency":"200ms","error_rate":0.1,"error_status":503,"drop_rate":0.05,"session_limit":2,
//	                                            "task_error":true,"task_hang":false,"unsticky_settings":["ProcVirtualization"],
//	                                            "manager_reset_downtime":"60s"}
//	PUT    /faults                        same, for every BMC
//	POST   /bmcs/{i}/expire-sessions      end all sessions (next token use → 401)
//	POST   /bmcs/{i}/reset-requests       zero the request counter
func (l *Lab) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /bmcs", func(w http.ResponseWriter, r *http.Request) {
		out := make([]AdminBMC, len(l.BMCs))
		for i := range l.BMCs {
			out[i] = l.adminRow(r, i)
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("GET /bmcs/{i}", func(w http.ResponseWriter, r *http.Request) {
		if i, ok := l.index(w, r); ok {
			writeJSON(w, http.StatusOK, l.adminRow(r, i))
		}
	})
	setFaults := func(w http.ResponseWriter, r *http.Request, bmcs []*BMC) {
		var f Faults
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
		if err := json.Unmarshal(b, &f); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad faults: " + err.Error()})
			return
		}
		for _, b := range bmcs {
			_ = b.SetFaults(f) // validated by UnmarshalJSON
		}
		writeJSON(w, http.StatusOK, f)
	}
	mux.HandleFunc("PUT /faults", func(w http.ResponseWriter, r *http.Request) { setFaults(w, r, l.BMCs) })
	mux.HandleFunc("PUT /bmcs/{i}/faults", func(w http.ResponseWriter, r *http.Request) {
		if i, ok := l.index(w, r); ok {
			setFaults(w, r, l.BMCs[i:i+1])
		}
	})
	mux.HandleFunc("POST /bmcs/{i}/expire-sessions", func(w http.ResponseWriter, r *http.Request) {
		if i, ok := l.index(w, r); ok {
			l.BMCs[i].ExpireSessions()
			w.WriteHeader(http.StatusNoContent)
		}
	})
	mux.HandleFunc("POST /bmcs/{i}/reset-requests", func(w http.ResponseWriter, r *http.Request) {
		if i, ok := l.index(w, r); ok {
			writeJSON(w, http.StatusOK, map[string]uint64{"requests": l.BMCs[i].ResetRequests()})
		}
	})
	return mux
}

func (l *Lab) index(w http.ResponseWriter, r *http.Request) (int, bool) {
	i, err := strconv.Atoi(r.PathValue("i"))
	if err != nil || i < 0 || i >= len(l.BMCs) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such BMC"})
		return 0, false
	}
	return i, true
}

func (l *Lab) adminRow(r *http.Request, i int) AdminBMC {
	b := l.BMCs[i]
	u, p := b.Credentials()
	row := AdminBMC{Index: i, URL: b.URL, Personality: b.Personality().Name, Username: u, Password: p,
		Requests: b.Requests(), Sessions: b.Sessions(), Faults: b.Faults()}
	for _, id := range b.SystemIDs() {
		row.Systems = append(row.Systems, b.SystemPath(id))
	}
	if ps, err := b.Backend(b.SystemIDs()[0]).PowerState(r.Context()); err == nil {
		row.PowerState = string(ps)
	}
	return row
}
