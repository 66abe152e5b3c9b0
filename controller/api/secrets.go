package api

// Keeping secrets out of answers: JSON patch reads, write-backs and error
// messages (views mask through maskedNode).

import (
	"github.com/kilnhq/kiln/controller/api/jsonpatch"
	"github.com/kilnhq/kiln/controller/secrets"
)

// secretReadRefused is the one answer to a copy, move or test that would read
// a masked value. It is the same whatever the stored value is, so that a
// test cannot serve as a guessing oracle.
func secretReadRefused(op jsonpatch.Op, ptr string) error {
	return badRequest("Invalid patch: operation %q on %q is not allowed: it reads a value that is masked in API answers (secrets are write-only)", op.Op, ptr)
}

// refuseSecretReads refuses a patch whose copy, move or test reads a secret:
// a pointer naming a secret key anywhere along it (whether or not a value is
// stored there), or one addressing a value that holds a secret at any depth
// (copy of /driver_info as a whole). Each op is judged against the document
// as the ops before it leave it, so array shifts cannot smuggle a secret to
// an innocent-looking index.
func refuseSecretReads(doc map[string]any, ops []jsonpatch.Op) error {
	for i, op := range ops {
		var ptr string
		switch op.Op {
		case jsonpatch.OpCopy, jsonpatch.OpMove:
			ptr = op.From
		case jsonpatch.OpTest:
			ptr = op.Path
		default:
			continue
		}
		toks, err := jsonpatch.Tokens(ptr)
		if err != nil {
			continue // jsonpatch.Apply reports the bad pointer
		}
		for _, t := range toks {
			if secrets.IsSecretKey(t) {
				return secretReadRefused(op, ptr)
			}
		}
		before := doc
		if i > 0 {
			if before, err = jsonpatch.Apply(doc, ops[:i]); err != nil {
				return nil // jsonpatch.Apply reports the failing op
			}
		}
		if v, err := jsonpatch.Get(before, ptr); err == nil && secrets.HoldsSecret(v) {
			return secretReadRefused(op, ptr)
		}
	}
	return nil
}

// keepStoredSecrets puts back every stored secret the patched document
// carries as "******" (a client that read the masked node and wrote it
// back), at any depth.
func keepStoredSecrets(stored, patched map[string]any) map[string]any {
	return secrets.KeepMasked(stored, patched).(map[string]any)
}

// scrubbedError is e with agent tokens and URL credentials removed from its
// message (a driver or store error may quote a URL); e itself may be shared
// and is not changed.
func scrubbedError(e *Error) *Error {
	msg := secrets.Scrub(e.Msg)
	if msg == e.Msg {
		return e
	}
	c := *e
	c.Msg = msg
	return &c
}
