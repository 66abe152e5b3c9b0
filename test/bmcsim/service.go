package bmcsim

import (
	crand "crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Default credentials of a Service whose Config leaves them empty.
const (
	DefaultUsername = "admin"
	DefaultPassword = "password"
)

// Config configures a Service.
type Config struct {
	// Personality names a registered personality: generic (default), idrac,
	// ilo, supermicro.
	Personality string
	// Username and Password are the one account (defaults admin/password).
	Username, Password string
	// Systems are the machines behind this service root; at least one.
	// Personalities with virtual media on the manager allow exactly one.
	Systems []SystemConfig
	// Logger receives one debug line per request (nil = discard).
	Logger *slog.Logger
	// Clock moves tasks on (nil = the real clock); a ManualClock makes
	// tests deterministic.
	Clock Clock
	// TaskDuration is how long a task (volume create/delete, firmware update)
	// runs on Clock; zero means DefaultTaskDuration.
	TaskDuration time.Duration
}

// SystemConfig is one system of a Service.
type SystemConfig struct {
	// ID is the Systems/<ID> path segment; empty = the personality's default
	// (only for the first system).
	ID      string
	Backend Backend
}

type system struct {
	id       string
	backend  Backend
	requests atomic.Uint64 // requests under Systems/<id> and Chassis/<id>
	mu       sync.Mutex
	asset    string
	hw       *hwState
}

type session struct {
	id, token, user string
	created         time.Time
}

// Service is one simulated BMC: an http.Handler serving /redfish/v1 for its
// systems, with faults and request counting. Safe for concurrent use.
type Service struct {
	p          *Personality
	user, pass string
	systems    []*system
	byID       map[string]*system
	log        *slog.Logger
	uuid       string

	faults        atomic.Pointer[Faults]
	errorSeq      atomic.Uint64 // requests seen by ErrorRate since SetFaults
	dropSeq       atomic.Uint64 // requests seen by DropRate since SetFaults
	requests      atomic.Uint64
	managerResets atomic.Uint64
	bmcDownUntil  atomic.Int64 // Clock UnixNano until which a manager reset keeps the BMC unreachable

	clock    Clock
	taskDur  time.Duration
	taskMu   sync.Mutex
	tasks    []*task
	taskByID map[string]*task
	nextTask int

	fwMu       sync.Mutex
	bmcVersion string
	bmcStaged  string // active after the next manager reset

	mu       sync.Mutex
	sessions map[string]*session // by token
	nextSID  int
}

// NewService builds a Service from cfg.
func NewService(cfg Config) (*Service, error) {
	p, err := LookupPersonality(cfg.Personality)
	if err != nil {
		return nil, err
	}
	if len(cfg.Systems) == 0 {
		return nil, errors.New("bmcsim: a service needs at least one system")
	}
	if p.VirtualMediaOnManager && len(cfg.Systems) != 1 {
		return nil, fmt.Errorf("bmcsim: personality %s has one system per BMC, got %d", p.Name, len(cfg.Systems))
	}
	s := &Service{p: p, user: cfg.Username, pass: cfg.Password, byID: map[string]*system{},
		log: cfg.Logger, sessions: map[string]*session{}, clock: cfg.Clock, taskDur: cfg.TaskDuration,
		taskByID: map[string]*task{}, bmcVersion: "1.0.0"}
	if s.clock == nil {
		s.clock = realClock{}
	}
	if s.taskDur <= 0 {
		s.taskDur = DefaultTaskDuration
	}
	if s.user == "" {
		s.user = DefaultUsername
	}
	if s.pass == "" {
		s.pass = DefaultPassword
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	for i, sc := range cfg.Systems {
		id := sc.ID
		if id == "" {
			if i > 0 {
				return nil, fmt.Errorf("bmcsim: system %d has no ID", i)
			}
			id = p.SystemID
		}
		if strings.ContainsAny(id, "/?#") {
			return nil, fmt.Errorf("bmcsim: system ID %q is not a path segment", id)
		}
		if _, dup := s.byID[id]; dup {
			return nil, fmt.Errorf("bmcsim: duplicate system ID %q", id)
		}
		if sc.Backend == nil {
			return nil, fmt.Errorf("bmcsim: system %q has no backend", id)
		}
		sys := &system{id: id, backend: sc.Backend, hw: newHWState(sc.Backend)}
		s.systems = append(s.systems, sys)
		s.byID[id] = sys
	}
	s.uuid = s.systems[0].backend.Inventory().UUID
	s.faults.Store(&Faults{})
	return s, nil
}

// Personality returns the service's personality.
func (s *Service) Personality() *Personality { return s.p }

// Credentials returns the account that the service accepts.
func (s *Service) Credentials() (user, password string) { return s.user, s.pass }

// SystemIDs returns the IDs of the systems, in order.
func (s *Service) SystemIDs() []string {
	ids := make([]string, len(s.systems))
	for i, sys := range s.systems {
		ids[i] = sys.id
	}
	return ids
}

// Backend returns the backend of the system with the given ID, nil if none.
func (s *Service) Backend(id string) Backend {
	if sys := s.byID[id]; sys != nil {
		return sys.backend
	}
	return nil
}

// SystemPath returns the Redfish path of a system: /redfish/v1/Systems/<id>.
func (s *Service) SystemPath(id string) string { return "/redfish/v1/Systems/" + id }

// SetFaults replaces the faults injected from now on.
func (s *Service) SetFaults(f Faults) error {
	if err := f.Validate(); err != nil {
		return fmt.Errorf("set faults: %w", err)
	}
	s.errorSeq.Store(0)
	s.dropSeq.Store(0)
	s.faults.Store(&f)
	return nil
}

// Faults returns the faults currently injected.
func (s *Service) Faults() Faults { return *s.faults.Load() }

// Requests returns how many HTTP requests reached the service (including
// faulted ones) since it started or since the last ResetRequests.
func (s *Service) Requests() uint64 { return s.requests.Load() }

// SystemRequests returns how many requests addressed the system with the
// given ID (paths under Systems/<id> or Chassis/<id>): the per-node count when
// many systems share one service. Session, service-root and manager requests
// are only in Requests.
func (s *Service) SystemRequests(id string) uint64 {
	if sys := s.byID[id]; sys != nil {
		return sys.requests.Load()
	}
	return 0
}

// ResetRequests sets the request counter back to zero and returns its old value.
func (s *Service) ResetRequests() uint64 { return s.requests.Swap(0) }

// Sessions returns how many sessions are open.
func (s *Service) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// ExpireSessions ends every session, as a BMC does on timeout or reboot: the
// next request with an old X-Auth-Token gets 401.
func (s *Service) ExpireSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.sessions)
}

// ServeHTTP implements http.Handler.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	f := s.faults.Load()
	if f.Latency > 0 {
		t := time.NewTimer(f.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	rebooting := s.clock.Now().UnixNano() < s.bmcDownUntil.Load()
	if rebooting || (f.DropRate > 0 && spread(s.dropSeq.Add(1), f.DropRate)) {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler) // not hijackable (HTTP/2): abort the stream
	}
	if f.ErrorRate > 0 && spread(s.errorSeq.Add(1), f.ErrorRate) {
		status := f.ErrorStatus
		if status == 0 {
			status = http.StatusInternalServerError
		}
		errGeneral(status).write(w)
		return
	}
	s.log.Debug("redfish request", "method", r.Method, "path", r.URL.Path)
	if e := s.route(w, r); e != nil {
		e.write(w)
	}
}

const root = "/redfish/v1"

// route dispatches on the path segments below /redfish/v1.
func (s *Service) route(w http.ResponseWriter, r *http.Request) *apiError {
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch path {
	case "/redfish":
		return only(r, "GET", func() *apiError {
			writeJSON(w, http.StatusOK, map[string]any{"v1": "/redfish/v1/"})
			return nil
		})
	case root:
		return only(r, "GET", func() *apiError { s.serviceRoot(w); return nil })
	case root + "/SessionService/Sessions":
		if r.Method == http.MethodPost {
			return s.createSession(w, r)
		}
	}
	if !strings.HasPrefix(path, root+"/") {
		return errNotFound(r.URL.Path)
	}
	if e := s.authenticate(r); e != nil {
		return e
	}
	seg := strings.Split(strings.TrimPrefix(path, root+"/"), "/")
	switch seg[0] {
	case "Systems":
		return s.routeSystems(w, r, seg[1:])
	case "Managers":
		return s.routeManagers(w, r, seg[1:])
	case "Chassis":
		return s.routeChassis(w, r, seg[1:])
	case "SessionService":
		return s.routeSessions(w, r, seg[1:])
	case "TaskService":
		return s.routeTasks(w, r, seg[1:])
	case "UpdateService":
		return s.routeUpdate(w, r, seg[1:])
	case "Registries":
		return s.routeRegistries(w, r, seg[1:])
	}
	return errNotFound(r.URL.Path)
}

// only runs h if the method is allowed ("GET" or "GET,PATCH" lists), else 405.
func only(r *http.Request, allow string, h func() *apiError) *apiError {
	for _, m := range strings.Split(allow, ",") {
		if r.Method == m || (m == "GET" && r.Method == http.MethodHead) {
			return h()
		}
	}
	return errMethodNotAllowed(strings.ReplaceAll(allow, ",", ", "))
}

func (s *Service) authenticate(r *http.Request) *apiError {
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		ttl := s.faults.Load().SessionTTL
		s.mu.Lock()
		se, ok := s.sessions[tok]
		if ok && ttl > 0 && time.Since(se.created) > ttl {
			delete(s.sessions, tok)
			ok = false
		}
		s.mu.Unlock()
		if ok {
			return nil
		}
		return errNoValidSession()
	}
	if u, p, ok := r.BasicAuth(); ok && s.credentialsOK(u, p) {
		return nil
	}
	return errNoValidSession()
}

func (s *Service) credentialsOK(u, p string) bool {
	uo := subtle.ConstantTimeCompare([]byte(u), []byte(s.user))
	po := subtle.ConstantTimeCompare([]byte(p), []byte(s.pass))
	return uo&po == 1
}

func odata(id, typ string) map[string]any {
	short := typ[1:]
	if i := strings.Index(short, "."); i > 0 {
		// "#ComputerSystem.v1_20_0.ComputerSystem" → "ComputerSystem.ComputerSystem"
		parts := strings.Split(short, ".")
		short = parts[0] + "." + parts[len(parts)-1]
	}
	return map[string]any{
		"@odata.id":      id,
		"@odata.type":    typ,
		"@odata.context": root + "/$metadata#" + short,
	}
}

func link(id string) map[string]any { return map[string]any{"@odata.id": id} }

func collection(id, typ, name string, members []string) map[string]any {
	m := odata(id, typ)
	m["Name"] = name
	l := make([]any, len(members))
	for i, x := range members {
		l[i] = link(x)
	}
	m["Members"] = l
	m["Members@odata.count"] = len(l)
	return m
}

func status() map[string]any { return map[string]any{"State": "Enabled", "Health": "OK"} }

// writeResource writes a GET answer with a strong ETag over the body.
func writeResource(w http.ResponseWriter, r *http.Request, v map[string]any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	sum := sha256.Sum256(b)
	etag := `"` + hex.EncodeToString(sum[:8]) + `"`
	w.Header().Set("ETag", etag)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("OData-Version", "4.0")
	if inm := r.Header.Get("If-None-Match"); inm == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}

// checkIfMatch enforces If-Match on PATCH against the resource's current ETag.
func checkIfMatch(r *http.Request, current map[string]any) *apiError {
	im := r.Header.Get("If-Match")
	if im == "" || im == "*" {
		return nil
	}
	b, _ := json.Marshal(current)
	sum := sha256.Sum256(b)
	etag := `"` + hex.EncodeToString(sum[:8]) + `"`
	if strings.TrimPrefix(im, "W/") != etag {
		return errPreconditionFailed()
	}
	return nil
}

func (s *Service) serviceRoot(w http.ResponseWriter) {
	m := odata(root, "#ServiceRoot.v1_15_0.ServiceRoot")
	m["Id"] = "RootService"
	m["Name"] = "Root Service"
	m["RedfishVersion"] = "1.15.0"
	m["UUID"] = s.uuid
	m["Vendor"] = s.p.Vendor
	m["Product"] = s.p.Product
	m["Systems"] = link(root + "/Systems")
	m["Managers"] = link(root + "/Managers")
	m["Chassis"] = link(root + "/Chassis")
	m["SessionService"] = link(root + "/SessionService")
	m["TaskService"] = link(root + "/TaskService")
	m["UpdateService"] = link(updatePath)
	m["Registries"] = link(root + "/Registries")
	m["Links"] = map[string]any{"Sessions": link(root + "/SessionService/Sessions")}
	m["ProtocolFeaturesSupported"] = map[string]any{
		"ExpandQuery": map[string]any{"ExpandAll": false, "Levels": false, "Links": false, "NoLinks": false},
		"FilterQuery": false, "SelectQuery": false,
	}
	if o := s.oem("ServiceRoot"); o != nil {
		m["Oem"] = o
	}
	writeJSON(w, http.StatusOK, m)
}

func (s *Service) oem(kind string) map[string]any {
	if s.p.oem == nil {
		return nil
	}
	return s.p.oem(kind)
}

// readBody decodes a JSON object body; an empty body is an empty object.
func readBody(r *http.Request) (map[string]json.RawMessage, *apiError) {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return nil, errMalformedJSON()
	}
	m := map[string]json.RawMessage{}
	if len(strings.TrimSpace(string(b))) == 0 {
		return m, nil
	}
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, errMalformedJSON()
	}
	return m, nil
}

// stringField reads an optional string property; ok=false when absent.
func stringField(m map[string]json.RawMessage, key, path string) (v string, ok bool, e *apiError) {
	raw, present := m[key]
	if !present {
		return "", false, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil || string(raw) == "null" {
		return "", false, errValueType(path, strings.Trim(string(raw), `"`))
	}
	return v, true, nil
}

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// --- sessions ---

func (s *Service) routeSessions(w http.ResponseWriter, r *http.Request, seg []string) *apiError {
	switch {
	case len(seg) == 0:
		return only(r, "GET", func() *apiError {
			m := odata(root+"/SessionService", "#SessionService.v1_1_8.SessionService")
			m["Id"] = "SessionService"
			m["Name"] = "Session Service"
			m["ServiceEnabled"] = true
			m["SessionTimeout"] = 1800
			m["Status"] = status()
			m["Sessions"] = link(root + "/SessionService/Sessions")
			writeResource(w, r, m)
			return nil
		})
	case len(seg) == 1 && seg[0] == "Sessions":
		return only(r, "GET,POST", func() *apiError {
			s.mu.Lock()
			var ids []string
			for _, se := range s.sessions {
				ids = append(ids, root+"/SessionService/Sessions/"+se.id)
			}
			s.mu.Unlock()
			writeResource(w, r, collection(root+"/SessionService/Sessions",
				"#SessionCollection.SessionCollection", "Session Collection", ids))
			return nil
		})
	case len(seg) == 2 && seg[0] == "Sessions":
		se := s.sessionByID(seg[1])
		if se == nil {
			return errNotFound(r.URL.Path)
		}
		return only(r, "GET,DELETE", func() *apiError {
			if r.Method == http.MethodDelete {
				s.mu.Lock()
				delete(s.sessions, se.token)
				s.mu.Unlock()
				w.WriteHeader(http.StatusNoContent)
				return nil
			}
			writeResource(w, r, sessionResource(se))
			return nil
		})
	}
	return errNotFound(r.URL.Path)
}

func (s *Service) sessionByID(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, se := range s.sessions {
		if se.id == id {
			return se
		}
	}
	return nil
}

func sessionResource(se *session) map[string]any {
	m := odata(root+"/SessionService/Sessions/"+se.id, "#Session.v1_6_0.Session")
	m["Id"] = se.id
	m["Name"] = "User Session"
	m["UserName"] = se.user
	m["CreatedTime"] = se.created.UTC().Format(time.RFC3339)
	m["SessionType"] = "Redfish"
	return m
}

func (s *Service) createSession(w http.ResponseWriter, r *http.Request) *apiError {
	body, e := readBody(r)
	if e != nil {
		return e
	}
	user, okU, e := stringField(body, "UserName", "UserName")
	if e != nil {
		return e
	}
	pass, okP, e := stringField(body, "Password", "Password")
	if e != nil {
		return e
	}
	if !okU {
		return baseError(http.StatusBadRequest, "PropertyMissing",
			"The property UserName is a required property and must be included in the request.",
			"Ensure that the property is in the request body and has a valid value and resubmit the request if the operation failed.",
			[]string{"#/UserName"}, "UserName")
	}
	if !okP {
		return baseError(http.StatusBadRequest, "PropertyMissing",
			"The property Password is a required property and must be included in the request.",
			"Ensure that the property is in the request body and has a valid value and resubmit the request if the operation failed.",
			[]string{"#/Password"}, "Password")
	}
	if !s.credentialsOK(user, pass) {
		e := baseError(http.StatusUnauthorized, "ResourceAtUriUnauthorized",
			fmt.Sprintf("While accessing the resource at '%s', the service received an authorization error 'Unauthorized'.", r.URL.Path),
			"Ensure that the appropriate access is provided for the service in order for it to access the URI.",
			nil, r.URL.Path, "Unauthorized")
		return e
	}
	limit := s.faults.Load().SessionLimit
	var tok [16]byte
	_, _ = crand.Read(tok[:])
	s.mu.Lock()
	if limit > 0 && len(s.sessions) >= limit {
		s.mu.Unlock()
		return s.p.sessionLimit()
	}
	s.nextSID++
	se := &session{id: strconv.Itoa(s.nextSID), token: hex.EncodeToString(tok[:]), user: user, created: time.Now()}
	s.sessions[se.token] = se
	s.mu.Unlock()
	w.Header().Set("Location", root+"/SessionService/Sessions/"+se.id)
	w.Header().Set("X-Auth-Token", se.token)
	writeJSON(w, http.StatusCreated, sessionResource(se))
	return nil
}

// --- chassis and managers ---

func (s *Service) routeChassis(w http.ResponseWriter, r *http.Request, seg []string) *apiError {
	if len(seg) == 0 {
		return only(r, "GET", func() *apiError {
			var ids []string
			for _, sys := range s.systems {
				ids = append(ids, root+"/Chassis/"+sys.id)
			}
			writeResource(w, r, collection(root+"/Chassis", "#ChassisCollection.ChassisCollection", "Chassis Collection", ids))
			return nil
		})
	}
	sys := s.byID[seg[0]]
	if sys == nil {
		return errNotFound(r.URL.Path)
	}
	if len(seg) > 1 && seg[1] == "NetworkAdapters" {
		sys.requests.Add(1)
		return s.routeNetworkAdapters(w, r, sys, seg[2:])
	}
	if len(seg) != 1 {
		return errNotFound(r.URL.Path)
	}
	sys.requests.Add(1)
	return only(r, "GET", func() *apiError {
		inv := sys.backend.Inventory()
		ps, err := sys.backend.PowerState(r.Context())
		if err != nil {
			return errGeneral(http.StatusInternalServerError)
		}
		m := odata(root+"/Chassis/"+sys.id, "#Chassis.v1_23_0.Chassis")
		m["Id"] = sys.id
		m["Name"] = "Computer System Chassis"
		m["ChassisType"] = "RackMount"
		m["Manufacturer"] = inv.Manufacturer
		m["Model"] = inv.Model
		m["SerialNumber"] = inv.SerialNumber
		m["PowerState"] = ps
		m["Status"] = status()
		m["NetworkAdapters"] = link(root + "/Chassis/" + sys.id + "/NetworkAdapters")
		m["Links"] = map[string]any{
			"ComputerSystems": []any{link(s.SystemPath(sys.id))},
			"ManagedBy":       []any{link(root + "/Managers/" + s.p.ManagerID)},
		}
		writeResource(w, r, m)
		return nil
	})
}

func (s *Service) routeManagers(w http.ResponseWriter, r *http.Request, seg []string) *apiError {
	mid := s.p.ManagerID
	mpath := root + "/Managers/" + mid
	if len(seg) == 0 {
		return only(r, "GET", func() *apiError {
			writeResource(w, r, collection(root+"/Managers", "#ManagerCollection.ManagerCollection", "Manager Collection", []string{mpath}))
			return nil
		})
	}
	if seg[0] != mid {
		return errNotFound(r.URL.Path)
	}
	if len(seg) == 1 {
		return only(r, "GET", func() *apiError {
			m := odata(mpath, "#Manager.v1_17_0.Manager")
			m["Id"] = mid
			m["Name"] = "Manager"
			m["ManagerType"] = "BMC"
			m["Manufacturer"] = s.p.Vendor
			m["Model"] = s.p.managerModel()
			s.fwMu.Lock()
			m["FirmwareVersion"] = s.bmcVersion
			s.fwMu.Unlock()
			m["UUID"] = s.uuid
			m["PowerState"] = "On"
			m["Status"] = status()
			var servers, chassis []any
			for _, sys := range s.systems {
				servers = append(servers, link(s.SystemPath(sys.id)))
				chassis = append(chassis, link(root+"/Chassis/"+sys.id))
			}
			m["Links"] = map[string]any{"ManagerForServers": servers, "ManagerForChassis": chassis}
			m["VirtualMedia"] = link(mpath + "/VirtualMedia")
			m["Actions"] = map[string]any{"#Manager.Reset": map[string]any{
				"target":                            mpath + "/Actions/Manager.Reset",
				"ResetType@Redfish.AllowableValues": managerResetTypes,
			}}
			if o := s.oem("Manager"); o != nil {
				m["Oem"] = o
			}
			writeResource(w, r, m)
			return nil
		})
	}
	switch {
	case seg[1] == "VirtualMedia":
		return s.routeVirtualMedia(w, r, s.managerMedia(), mpath+"/VirtualMedia", seg[2:])
	case len(seg) == 3 && seg[1] == "Actions" && seg[2] == "Manager.Reset":
		return only(r, "POST", func() *apiError { return s.managerReset(w, r) })
	case seg[1] == "Jobs" && s.p.TaskIDPrefix == "JID_":
		return s.routeJobs(w, r, seg[2:])
	}
	return errNotFound(r.URL.Path)
}
