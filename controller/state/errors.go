package state

import "net/http"

// ErrKind says how the API must answer a refused request.
type ErrKind int

// Error kinds.
const (
	// BadRequest is 400: an unknown verb, a body field in the wrong place,
	// a node in maintenance or retired.
	BadRequest ErrKind = iota + 1
	// NotAcceptable is 406: the verb or a body field is newer than the
	// request's microversion.
	NotAcceptable
	// InvalidState is a verb not allowed from the node's state: Ironic answers
	// 409 if the node is reserved (locked by a running flow) and 400 otherwise.
	InvalidState
	// Conflict is 409 regardless of reservation (DELETE in a wrong state, node
	// associated with an instance, PATCH during a transition).
	Conflict
	// Forbidden is 403: the node is protected.
	Forbidden
)

func (k ErrKind) String() string {
	switch k {
	case BadRequest:
		return "bad request"
	case NotAcceptable:
		return "not acceptable"
	case InvalidState:
		return "invalid state"
	case Conflict:
		return "conflict"
	case Forbidden:
		return "forbidden"
	}
	return "unknown"
}

// Error is a refusal by the state machine. Its Kind decides the HTTP status
// (Status) and Faultstring gives Ironic's exact message, which names the node:
// the package does not know the node's identity, the API does.
type Error struct {
	Kind ErrKind
	// MinMinor is, for NotAcceptable, the microversion that would have been
	// accepted (0 if unknown).
	MinMinor int
	msg      string // Go-style description for logs and wrapping
	// Ironic's faultstring is faultPre + node + faultPost; when it names no
	// node faultPost is empty and noNode is true.
	faultPre, faultPost string
	noNode              bool
}

func (e *Error) Error() string { return e.msg }

// Faultstring is the message Ironic puts in the error body's faultstring,
// with node (the node's UUID, as Ironic prints it) filled in.
func (e *Error) Faultstring(node string) string {
	if e.noNode {
		return e.faultPre
	}
	return e.faultPre + node + e.faultPost
}

// Status is the HTTP status for the error; reserved says whether the node is
// currently locked (has a reservation), which turns InvalidState into 409.
func (e *Error) Status(reserved bool) int {
	switch e.Kind {
	case NotAcceptable:
		return http.StatusNotAcceptable
	case InvalidState:
		if reserved {
			return http.StatusConflict
		}
		return http.StatusBadRequest
	case Conflict:
		return http.StatusConflict
	case Forbidden:
		return http.StatusForbidden
	}
	return http.StatusBadRequest
}

func nodeErr(kind ErrKind, msg, pre, post string) *Error {
	return &Error{Kind: kind, msg: msg, faultPre: pre, faultPost: post}
}

func plainErr(kind ErrKind, msg, fault string) *Error {
	return &Error{Kind: kind, msg: msg, faultPre: fault, noNode: true}
}

// notAcceptable is Ironic's bare 406 message for verbs too new.
func notAcceptable(msg string, minMinor int) *Error {
	e := plainErr(NotAcceptable, msg, "Request not acceptable.")
	e.MinMinor = minMinor
	return e
}
