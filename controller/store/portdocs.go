package store

import "context"

// PortDocs reads ports as their stored documents (encoding/json's bytes of
// a proto.Port without links), for the API to render without decoding.
type PortDocs interface {
	// ListPortDocs is ListPorts' documents (Summary is ignored).
	ListPortDocs(ctx context.Context, q PortQuery) ([][]byte, error)
}

// PortDocsOf is st's PortDocs, through wrappers (Unwrapper); false if it
// has none.
func PortDocsOf(st Store) (PortDocs, bool) {
	for {
		if v, ok := st.(PortDocs); ok {
			return v, true
		}
		w, ok := st.(Unwrapper)
		if !ok {
			return nil, false
		}
		st = w.Unwrap()
	}
}

// ListPortDocs runs ListPorts' query, collecting the documents instead
// of decoding them.
func (s *sqlStore) ListPortDocs(ctx context.Context, q PortQuery) ([][]byte, error) {
	var docs [][]byte
	q.Summary, q.docs = false, &docs
	if _, err := s.ListPorts(ctx, q); err != nil {
		return nil, err
	}
	return docs, nil
}
