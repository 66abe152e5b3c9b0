package state

import (
	"fmt"
	"strconv"

	"github.com/kilnhq/kiln/proto"
)

// Node is what the machine needs to know about a node to decide a transition.
type Node struct {
	State  proto.ProvisionState // provision_state
	Target proto.ProvisionState // target_provision_state (NoState = null)
	// Maintenance refuses deploy/rebuild/clean/rescue/unrescue/service.
	Maintenance bool
	// Protected refuses rebuild and undeploy (and DELETE of the node).
	Protected bool
	// Retired refuses provide, and ends automated cleaning in manageable.
	Retired bool
}

// Transition is what taking an arrow does to a node: the caller stores To as
// provision_state and Target as target_provision_state in one write.
type Transition struct {
	From  proto.ProvisionState
	Event Event
	To    proto.ProvisionState
	// Target is the new target_provision_state: the flow's stable goal, or
	// NoState (null) when To is stable. Failed states keep their flow's goal.
	Target proto.ProvisionState
	// Deferrable is set on aborts of a step flow (clean/service wait and
	// hold): if the running step is not abortable the conductor must not take
	// the arrow now but flag the step abort_after and take it when the step
	// ends, as Ironic does.
	Deferrable bool
}

// verbInfo is one row of the verb table.
type verbInfo struct {
	verb  proto.Verb
	event Event
	// minor is the lowest microversion that knows the verb (Ironic's
	// MIN_VERB_VERSIONS); below it the API answers 406 before looking at the
	// node. 1 means always.
	minor int
	// maintenanceOp, if set, refuses the verb on a node in maintenance with
	// Ironic's NodeInMaintenance message for this operation name.
	maintenanceOp string
	// protected refuses the verb on a protected node (403).
	protected bool
}

// verbs lists every provision verb of §1. Aliases share an event. Ironic
// forgets to gate undeploy (its table is keyed by the internal name); Kiln
// gates it at 1.73 like deploy, as the API reference says.
var verbs = []verbInfo{
	{proto.VerbManage, EvManage, 4, "", false},
	{proto.VerbProvide, EvProvide, 4, "", false},
	{proto.VerbInspect, EvInspect, 6, "", false},
	{proto.VerbAbort, EvAbort, 13, "", false},
	{proto.VerbClean, EvClean, 15, "cleaning", false},
	{proto.VerbAdopt, EvAdopt, 17, "", false},
	{proto.VerbActive, EvDeploy, 1, "provisioning", false},
	{proto.VerbDeploy, EvDeploy, 73, "provisioning", false},
	{proto.VerbRebuild, EvRebuild, 1, "provisioning", true},
	{proto.VerbDeleted, EvDelete, 1, "", true},
	{proto.VerbUndeploy, EvDelete, 73, "", true},
	{proto.VerbRescue, EvRescue, 38, "rescuing", false},
	{proto.VerbUnrescue, EvUnrescue, 38, "unrescuing", false},
	// unhold (1.85) and service (1.87) are gated per arrow, after the state
	// check, as Ironic does: see the minor column of transitions.
	{proto.VerbUnhold, EvUnhold, 1, "", false},
	{proto.VerbService, EvService, 1, "service", false},
}

func lookupVerb(v proto.Verb) (verbInfo, bool) {
	for _, vi := range verbs {
		if vi.verb == v {
			return vi, true
		}
	}
	return verbInfo{}, false
}

func isVerbEvent(ev Event) bool {
	for _, vi := range verbs {
		if vi.event == ev {
			return true
		}
	}
	return false
}

// Verbs returns every provision verb the API accepts, in table order.
func Verbs() []proto.Verb {
	out := make([]proto.Verb, len(verbs))
	for i, vi := range verbs {
		out[i] = vi.verb
	}
	return out
}

// EventOf maps a verb to its event (active and deploy → deploy, deleted and
// undeploy → delete); ok is false for unknown verbs.
func EventOf(v proto.Verb) (ev Event, ok bool) {
	vi, ok := lookupVerb(v)
	return vi.event, ok
}

// MinMinor is the lowest microversion at which verb can succeed from some
// state (unhold 85, service 87, deploy 73 …); 0 for an unknown verb.
func MinMinor(v proto.Verb) int {
	vi, ok := lookupVerb(v)
	if !ok {
		return 0
	}
	lowest := 0
	for _, r := range transitions {
		if r.event == vi.event && r.api() && (lowest == 0 || r.minor < lowest) {
			lowest = r.minor
		}
	}
	return max(vi.minor, lowest, 1)
}

// Request validates PUT /v1/nodes/{id}/states/provision {"target": verb} for
// a node, at request microversion 1.minor, and returns the arrow to take.
// The checks run in Ironic's order:
//
//  1. unknown verb → BadRequest; verb newer than minor → NotAcceptable;
//  2. deploy/rebuild/clean/rescue/unrescue/service on a node in maintenance →
//     BadRequest (Ironic checks the last four in the conductor, after the
//     state; both answer 400);
//  3. no arrow for the verb from n.State → InvalidState (409 if reserved,
//     else 400, decided by Error.Status);
//  4. the arrow needs a newer microversion (abort from inspect wait 1.41,
//     from wait call-back 1.110; unhold 1.85; service 1.87) → NotAcceptable;
//  5. rebuild/undeploy of a protected node → Forbidden; provide of a
//     retired node → BadRequest.
//
// Body fields are checked separately by CheckBody.
func Request(n Node, verb proto.Verb, minor int) (Transition, error) {
	vi, ok := lookupVerb(verb)
	if !ok {
		return Transition{}, nodeErr(BadRequest,
			fmt.Sprintf("unknown provision verb %q", verb),
			fmt.Sprintf("The requested action %q can not be performed on node \"", string(verb)),
			fmt.Sprintf("\" while it is in state %q.", string(n.State)))
	}
	if minor < vi.minor {
		return Transition{}, notAcceptable(
			fmt.Sprintf("provision verb %q needs API version 1.%d, request has 1.%d", verb, vi.minor, minor), vi.minor)
	}
	if n.Maintenance && vi.maintenanceOp != "" {
		return Transition{}, nodeErr(BadRequest,
			fmt.Sprintf("provision verb %q refused: node in maintenance", verb),
			"The "+vi.maintenanceOp+" operation can't be performed on node ",
			" because it's in maintenance mode.")
	}
	r, ok := find(n, vi.event, true)
	if !ok {
		return Transition{}, nodeErr(InvalidState,
			fmt.Sprintf("provision verb %q invalid from state %q", verb, n.State),
			fmt.Sprintf("The requested action %q can not be performed on node \"", string(verb)),
			fmt.Sprintf("\" while it is in state %q.", string(n.State)))
	}
	if minor < r.minor {
		return Transition{}, notAcceptable(
			fmt.Sprintf("provision verb %q from state %q needs API version 1.%d, request has 1.%d", verb, n.State, r.minor, minor), r.minor)
	}
	if n.Protected && vi.protected {
		return Transition{}, nodeErr(Forbidden,
			fmt.Sprintf("provision verb %q refused: node is protected", verb),
			"Node ", " is protected and cannot be undeployed, rebuilt or deleted")
	}
	if n.Retired && vi.event == EvProvide {
		return Transition{}, nodeErr(BadRequest,
			fmt.Sprintf("provision verb %q refused: node is retired", verb),
			"The providing operation can't be performed on node ", " because it is retired.")
	}
	return r.transition(n), nil
}

// Next takes the arrow for event ev from n.State: the conductor calls it as a
// flow progresses (done, fail, wait, resume, hold, and clean from deleting),
// and to carry out a verb the API accepted. Unlike Request it checks no
// microversion, maintenance or protection: those gate requests, not flows.
// n.Target picks the end of cleaning (manageable after manual cleaning) and
// is kept through the clean* states; n.Retired ends automated cleaning in
// manageable.
func Next(n Node, ev Event) (Transition, error) {
	r, ok := find(n, ev, false)
	if !ok {
		return Transition{}, nodeErr(InvalidState,
			fmt.Sprintf("event %q invalid from state %q", ev, n.State),
			fmt.Sprintf("The requested action %q can not be performed on node \"", string(ev)),
			fmt.Sprintf("\" while it is in state %q.", string(n.State)))
	}
	return r.transition(n), nil
}

// find returns the row for ev from n.State; apiOnly skips internal rows.
func find(n Node, ev Event, apiOnly bool) (row, bool) {
	for _, r := range transitions {
		if apiOnly && !r.api() {
			continue
		}
		if r.matches(n.State, ev, n.Target, n.Retired) {
			return r, true
		}
	}
	return row{}, false
}

func (r row) transition(n Node) Transition {
	return Transition{
		From:       n.State,
		Event:      r.event,
		To:         r.to,
		Target:     r.targetAfter(n.Target),
		Deferrable: r.deferrable,
	}
}

// Microversions (minor numbers) at which body fields of the provision request
// became acceptable.
const (
	MinorRebuildConfigdrive    = 35  // configdrive with rebuild
	MinorConfigdriveDict       = 56  // configdrive as a JSON object
	MinorConfigdriveVendorData = 59  // vendor_data inside a configdrive object
	MinorDeploySteps           = 69  // deploy_steps
	MinorCleanDisableRamdisk   = 70  // disable_ramdisk with clean
	MinorRunbook               = 92  // runbook with clean/service
	MinorServiceDisableRamdisk = 108 // disable_ramdisk with service
)

// ConfigdriveForm is the JSON type of the configdrive body field.
type ConfigdriveForm int

// Configdrive forms.
const (
	ConfigdriveAbsent ConfigdriveForm = iota // absent, null or ""
	ConfigdriveString                        // gzip+base64 ISO or URL
	ConfigdriveDict                          // {meta_data, network_data, user_data, vendor_data}
)

// Body says which optional fields a provision request carries.
type Body struct {
	Configdrive ConfigdriveForm
	// ConfigdriveVendorData: the configdrive object has a vendor_data key.
	ConfigdriveVendorData bool
	CleanSteps            bool // non-empty clean_steps
	DeploySteps           bool // non-empty deploy_steps
	ServiceSteps          bool // non-empty service_steps
	DisableRamdisk        bool // disable_ramdisk present (true or false)
	Runbook               bool // runbook present
	// RescuePassword is the rescue_password field; nil when absent.
	RescuePassword *string
}

// CheckBody validates the optional fields of a provision request for verb at
// microversion 1.minor, in Ironic's order and with its messages: a field
// newer than the microversion is NotAcceptable (but a configdrive form too
// new is BadRequest, as in Ironic); a field meant for another verb, or a
// required field missing (clean_steps for clean unless a runbook is given,
// service_steps for service, a non-blank rescue_password for rescue), is
// BadRequest. Call it after Request succeeded.
func CheckBody(verb proto.Verb, minor int, b Body) error {
	ev, _ := EventOf(verb)
	isDeploy := ev == EvDeploy // active and its alias deploy
	if b.Configdrive != ConfigdriveAbsent {
		allowed := "active"
		okVerb := isDeploy
		if minor >= MinorRebuildConfigdrive {
			allowed += ", rebuild"
			okVerb = okVerb || ev == EvRebuild
		}
		if !okVerb {
			return plainErr(BadRequest, fmt.Sprintf("configdrive not allowed with verb %q", verb),
				"Adding a config drive is only supported when setting provision state to "+allowed)
		}
		if b.Configdrive == ConfigdriveDict && minor < MinorConfigdriveDict {
			return plainErr(BadRequest, "configdrive object needs API version 1."+strconv.Itoa(MinorConfigdriveDict),
				"Providing a JSON object for configdrive is only supported starting with API version 1."+strconv.Itoa(MinorConfigdriveDict))
		}
		if b.Configdrive == ConfigdriveDict && b.ConfigdriveVendorData && minor < MinorConfigdriveVendorData {
			return plainErr(BadRequest, "configdrive vendor_data needs API version 1."+strconv.Itoa(MinorConfigdriveVendorData),
				"Providing vendor_data in configdrive is only supported starting with API version 1."+strconv.Itoa(MinorConfigdriveVendorData))
		}
	}
	if b.Runbook {
		if minor < MinorRunbook {
			return notAcceptable("runbook needs API version 1."+strconv.Itoa(MinorRunbook), MinorRunbook)
		}
		if ev != EvClean && ev != EvService {
			return plainErr(BadRequest, fmt.Sprintf("runbook not allowed with verb %q", verb),
				`"runbooks" is only valid when setting target provision state to any of ['clean', 'service']`)
		}
	}
	if b.DisableRamdisk {
		switch ev {
		case EvClean:
			if minor < MinorCleanDisableRamdisk {
				return notAcceptable("disable_ramdisk with clean needs API version 1."+strconv.Itoa(MinorCleanDisableRamdisk), MinorCleanDisableRamdisk)
			}
		case EvService:
			if minor < MinorServiceDisableRamdisk {
				return notAcceptable("disable_ramdisk with service needs API version 1."+strconv.Itoa(MinorServiceDisableRamdisk), MinorServiceDisableRamdisk)
			}
		default:
			return plainErr(BadRequest, fmt.Sprintf("disable_ramdisk not allowed with verb %q", verb),
				"disable_ramdisk is supported only with manual cleaning or servicing")
		}
	}
	if b.CleanSteps && ev != EvClean {
		return plainErr(BadRequest, fmt.Sprintf("clean_steps not allowed with verb %q", verb),
			`"clean_steps" is only valid when setting target provision state to clean`)
	}
	if b.DeploySteps {
		if minor < MinorDeploySteps {
			e := plainErr(NotAcceptable, "deploy_steps needs API version 1."+strconv.Itoa(MinorDeploySteps),
				"Request not acceptable. The minimal required API version should be 1."+strconv.Itoa(MinorDeploySteps))
			e.MinMinor = MinorDeploySteps
			return e
		}
		if !isDeploy && ev != EvRebuild {
			return plainErr(BadRequest, fmt.Sprintf("deploy_steps not allowed with verb %q", verb),
				`"deploy_steps" is only valid when setting target provision state to active or rebuild`)
		}
	}
	if b.RescuePassword != nil && ev != EvRescue {
		return plainErr(BadRequest, fmt.Sprintf("rescue_password not allowed with verb %q", verb),
			`"rescue_password" is only valid when setting target provision state to rescue`)
	}
	if b.ServiceSteps && ev != EvService {
		return plainErr(BadRequest, fmt.Sprintf("service_steps not allowed with verb %q", verb),
			`"service_steps" is only valid when setting target provision state to service`)
	}
	switch ev {
	case EvRescue:
		if b.RescuePassword == nil || isBlank(*b.RescuePassword) {
			return plainErr(BadRequest, "rescue needs a non-empty rescue_password",
				`A non-empty "rescue_password" is required when setting target provision state to rescue`)
		}
	case EvClean:
		if !b.CleanSteps && !b.Runbook {
			return plainErr(BadRequest, "clean needs clean_steps",
				`"clean_steps" is required when setting target provision state to clean`)
		}
	case EvService:
		if !b.ServiceSteps && !b.Runbook {
			return plainErr(BadRequest, "service needs service_steps",
				`"service_steps" is required when setting target provision state to service`)
		}
	}
	return nil
}

// isBlank mirrors Python's str.strip() == "" for ASCII whitespace.
func isBlank(s string) bool {
	for _, c := range s {
		switch c {
		case ' ', '\t', '\n', '\r', '\v', '\f':
		default:
			return false
		}
	}
	return true
}
