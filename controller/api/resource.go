package api

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/api/jsonpatch"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// resource describes one API collection of T, stored by store.Resources,
// so that the generic handlers below serve its create, list (filters,
// fields, detail, paging, sorting), get, patch and delete. A new resource is
// a resource value plus its store.Resource; behaviour beyond the common
// rules goes into the hooks.
type resource[T any] struct {
	kind string // in messages: "Chassis %s could not be found."
	name string // the collection: URL segment and list key
	// path is the collection's URL under /v1/ where it is not name
	// ("volume/connectors", listed as "connectors").
	path string
	// minVersion gives the microversion that introduced each field; fields
	// absent from it are as old as the collection.
	minVersion map[string]int
	// sinceVersion is the microversion that introduced the collection (0:
	// always there); older requests get 404, as from Ironic.
	sinceVersion int
	// writesTooOld405: below sinceVersion, writes answer 405 and GET 404
	// (Ironic's allocations); otherwise every method answers 404 (or
	// tooOld's answers).
	writesTooOld405 bool
	// tooOld, when set, is the message older requests get: 404 for a GET,
	// 405 for the other methods (deploy templates, runbooks).
	tooOld string
	// byName, when set, is the store filter that finds an object by its
	// name: the URL may then name an object by UUID or name.
	byName       string
	listFields   []string // the fields a list shows without detail or fields
	createFields []string // the keys POST accepts
	required     []string // keys POST needs
	patchable    []string // root paths PATCH may change
	mandatory    []string // root paths PATCH may not remove
	secret       []string // fields masking rewrites (see mask)
	filters      map[string]filter
	// fresh is a new object before the client's fields: the defaults, and
	// what a removed root field goes back to on PATCH.
	fresh func() T
	// validate checks (and normalizes) an object after create's decoding
	// and after a patch; its error is the answer. minorOf(ctx) is the
	// request's microversion.
	validate func(ctx context.Context, v *T) error
	// keep copies the fields a patch may not change from the stored object
	// (the store keeps the UUID and created_at already).
	keep func(from, to *T)
	// mask returns v with its secrets masked; nil when it has none.
	mask func(v *T) T
	// links fills in the link lists of v that the plan shows.
	links func(c echo.Context, v *T, shown map[string]bool)
	// guard, when set, may refuse a change of v: its update (v as patched)
	// or deletion (v as stored), action naming which. It may read the
	// store (not write it).
	guard func(ctx context.Context, v *T, action string) error
	// inUse is the answer to deleting an object that others refer to.
	inUse func(ident string) *Error
	// taken is the answer to a write of v that violates a unique
	// constraint other than the UUID's (err wraps the Resource.Unique
	// error), nil for other errors.
	taken func(err error, v *T) *Error
	// patchSince is the microversion from which PATCH exists (older: 405).
	patchSince int
	// prepare completes a new object from the request body after decoding
	// (what the body says beyond the object's own fields), before validate.
	prepare func(c echo.Context, obj map[string]json.RawMessage, v *T) error
	// created runs after the object is stored and returns what to answer.
	created func(c echo.Context, v *T) (*T, error)
	// deleting runs before the object is deleted; its error refuses.
	deleting func(c echo.Context, v *T) error
	// storeError, when set, answers store errors first (nil: the common
	// answers below).
	storeError func(err error, ident string) *Error
	// exclusive lists filters of which a request may give only one (400
	// with exclusiveMsg otherwise).
	exclusive    []string
	exclusiveMsg string
	// lock, when set, takes the lock that create, patch and delete of v
	// hold (its node's), returning its release; check then judges the
	// change against other objects (old nil on create, updated nil on
	// delete). Both run before the write, outside its transaction.
	lock  func(ctx context.Context, v *T) (func(), error)
	check func(ctx context.Context, old, updated *T) error
	// noDetailPath: the collection has no …/detail route, only ?detail=
	// (Ironic's inspection rules); "detail" is then an identifier.
	noDetailPath bool

	store  *store.Resources[T]
	wire   []wireField
	known  map[string]bool
	sorted map[string]bool
}

// filter is a list query parameter: the store filter it sets, from which
// microversion, and how its value is checked.
type filter struct {
	store      string
	minVersion int
	check      func(string) (string, error) // nil: taken as is
	// resolve, when set, maps the checked value to the stored one with
	// the store at hand (a node name to its UUID).
	resolve func(ctx context.Context, v string) (string, error)
}

// mount completes r for st and routes its collection on e. An error from
// the store (a Store that is not SQL) leaves the routes answering 503 with
// it, so that the rest of the API still works.
func (r *resource[T]) mount(e *echo.Echo, st *store.Resources[T], err error) {
	r.store = st
	r.wire = wireFields(reflect.TypeFor[T](), r.minVersion, r.secret)
	r.known = map[string]bool{}
	for _, f := range r.wire {
		r.known[f.name] = true
	}
	base := "/v1/" + r.urlPath()
	h := func(f echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if minor(c) < r.sinceVersion {
				switch {
				case r.tooOld != "" && c.Request().Method == http.MethodGet:
					return notFound("%s", r.tooOld)
				case r.tooOld != "":
					return errorf(http.StatusMethodNotAllowed, "%s", r.tooOld)
				case r.writesTooOld405 && c.Request().Method != http.MethodGet:
					return &Error{Code: http.StatusMethodNotAllowed, Msg: "The API version does not allow " + r.name, bare: true}
				}
				return notFound("The resource could not be found.")
			}
			if err != nil {
				return errorf(http.StatusServiceUnavailable, "%s are not available: %v", r.name, err)
			}
			return f(c)
		}
	}
	if st != nil {
		r.sorted = sortKeys(st.SortKeys())
	}
	e.GET(base, h(r.list))
	e.GET(base+"/", h(r.list))
	if !r.noDetailPath {
		e.GET(base+"/detail", h(r.listDetail))
	}
	e.POST(base, h(r.create))
	e.GET(base+"/:id", h(r.get))
	e.PATCH(base+"/:id", h(r.patch))
	e.DELETE(base+"/:id", h(r.delete))
}

// urlPath is the collection's path under /v1/.
func (r *resource[T]) urlPath() string {
	if r.path != "" {
		return r.path
	}
	return r.name
}

// ident reads the object's UUID from the URL, or its name where the
// resource has names; anything else is a 400, as in Ironic.
func (r *resource[T]) ident(c echo.Context) (string, error) {
	return r.lookup(c.Request().Context(), c.Param("id"))
}

// lookup is ident for s, a UUID or (where the resource has names) a name.
func (r *resource[T]) lookup(ctx context.Context, s string) (string, error) {
	u, err := uuid.Parse(s)
	if err == nil && len(s) == 36 {
		return u.String(), nil
	}
	if r.byName == "" {
		return "", badRequest("Expected a UUID but received %s.", s)
	}
	if len(s) > 255 || !nameRE.MatchString(s) {
		return "", badRequest("Expected a logical name or UUID but received %s.", s)
	}
	if r.store.Named() {
		v, err := r.store.GetByName(ctx, s)
		if errors.Is(err, store.ErrNotFound) {
			return "", notFound("%s %s could not be found.", r.kind, s)
		}
		if err != nil {
			return "", err
		}
		return *r.store.UUID(v), nil
	}
	items, err := r.store.List(ctx, store.Query{Filters: map[string]string{r.byName: s}, Limit: 1})
	if err != nil {
		return "", err
	}
	if len(items) == 0 {
		return "", notFound("%s %s could not be found.", r.kind, s)
	}
	return *r.store.UUID(items[0]), nil
}

// locked runs fn under r.lock for v, when the resource has one.
func (r *resource[T]) locked(ctx context.Context, v *T, fn func() error) error {
	if r.lock == nil {
		return fn()
	}
	unlock, err := r.lock(ctx, v)
	if err != nil {
		return err
	}
	defer unlock()
	return fn()
}

// failed turns a store error into Ironic's answer.
func (r *resource[T]) failed(err error, ident string) error {
	if r.storeError != nil {
		if e := r.storeError(err, ident); e != nil {
			return e
		}
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notFound("%s %s could not be found.", r.kind, ident)
	case errors.Is(err, store.ErrDuplicateUUID):
		return conflict("A %s with UUID %s already exists.", strings.ToLower(r.kind), ident)
	case errors.Is(err, store.ErrInUse) && r.inUse != nil:
		return r.inUse(ident)
	}
	var apiErr *Error
	if errors.As(err, &apiErr) {
		return apiErr
	}
	return err
}

// failedWrite is failed for a create or update of v, which may also
// violate a unique constraint (Resource.Unique): taken answers those.
func (r *resource[T]) failedWrite(err error, ident string, v *T) error {
	if r.taken != nil && !errors.Is(err, store.ErrDuplicateUUID) {
		if e := r.taken(err, v); e != nil {
			return e
		}
	}
	return r.failed(err, ident)
}

// send answers with one object, as the plan shows it.
func (r *resource[T]) send(c echo.Context, status int, v *T, fields []string) error {
	w := getWriter()
	defer putWriter(w)
	if err := r.write(c, w, v, planFields(r.wire, minor(c), fields)); err != nil {
		return err
	}
	w.buf.WriteByte('\n')
	return c.Blob(status, echo.MIMEApplicationJSON, w.buf.Bytes())
}

func (r *resource[T]) write(c echo.Context, w *objectWriter, v *T, p fieldPlan) error {
	m := *v
	if p.masked && r.mask != nil {
		m = r.mask(v)
	}
	if r.links != nil {
		r.links(c, &m, p.shown)
	}
	return w.object(&m, p)
}

func (r *resource[T]) create(c echo.Context) error {
	obj, err := readJSONObject(c, r.name)
	if err != nil {
		return err
	}
	if err := checkFields(c, r.name, obj, r.createFields, r.minVersion); err != nil {
		return err
	}
	for _, k := range r.required {
		if _, ok := obj[k]; !ok {
			return badRequest("Schema error for %s: '%s' is a required property", r.name, k)
		}
	}
	v := r.fresh()
	if err := decodeInto(obj, &v, r.name); err != nil {
		return err
	}
	if r.prepare != nil {
		if err := r.prepare(c, obj, &v); err != nil {
			return err
		}
	}
	id := r.store.UUID(&v)
	if *id == "" {
		*id = uuid.NewString()
	} else if u, err := uuid.Parse(*id); err != nil {
		return badRequest("Expected a UUID but received %s.", *id)
	} else {
		*id = u.String()
	}
	ctx := withMinor(c.Request().Context(), minor(c))
	if r.validate != nil {
		if err := r.validate(ctx, &v); err != nil {
			return err
		}
	}
	err = r.locked(ctx, &v, func() error {
		if r.check != nil {
			if err := r.check(ctx, nil, &v); err != nil {
				return err
			}
		}
		return r.store.Create(ctx, &v)
	})
	if err != nil {
		return r.failedWrite(err, *id, &v)
	}
	out := &v
	if r.created != nil {
		if out, err = r.created(c, &v); err != nil {
			return r.failed(err, *id)
		}
	}
	c.Response().Header().Set("Location", baseURL(c)+"/v1/"+r.urlPath()+"/"+*id)
	return r.send(c, http.StatusCreated, out, nil)
}

func (r *resource[T]) get(c echo.Context) error {
	fields, err := parseFields(c, r.known, r.minVersion)
	if err != nil {
		return err
	}
	id, err := r.ident(c)
	if err != nil {
		return err
	}
	v, err := r.store.Get(c.Request().Context(), id)
	if err != nil {
		return r.failed(err, id)
	}
	return r.send(c, http.StatusOK, v, fields)
}

func (r *resource[T]) list(c echo.Context) error {
	detail, err := parseBool(c, "detail")
	if err != nil {
		return err
	}
	if detail != nil && minor(c) < 43 {
		return notAcceptable()
	}
	return r.listCommon(c, detail != nil && *detail, "/v1/"+r.urlPath())
}

func (r *resource[T]) listDetail(c echo.Context) error {
	if c.QueryParam("detail") != "" {
		return badRequest("Parameter 'detail' is not allowed on /v1/%s/detail", r.urlPath())
	}
	return r.listCommon(c, true, "/v1/"+r.urlPath()+"/detail")
}

// listQuery reads the request's filters into a store query.
func (r *resource[T]) listQuery(c echo.Context) (map[string]string, error) {
	var out map[string]string
	for _, param := range slices.Sorted(maps.Keys(r.filters)) {
		f := r.filters[param]
		v := c.QueryParam(param)
		if v == "" {
			continue
		}
		if minor(c) < f.minVersion {
			return nil, notAcceptable()
		}
		if f.check != nil {
			var err error
			if v, err = f.check(v); err != nil {
				return nil, err
			}
		}
		if f.resolve != nil {
			var err error
			if v, err = f.resolve(c.Request().Context(), v); err != nil {
				return nil, err
			}
		}
		if out == nil {
			out = map[string]string{}
		}
		out[f.store] = v
	}
	return out, nil
}

// listOf serves a sub-collection: the objects whose store filters are
// fixed (a node's port groups), from GET …/{parent}/{name}[/detail].
func (r *resource[T]) listOf(c echo.Context, detailPath bool, path string, fixed map[string]string) error {
	detail := detailPath
	if detailPath {
		if c.QueryParam("detail") != "" {
			return badRequest("Parameter 'detail' is not allowed on %s/detail", path)
		}
		path += "/detail"
	} else {
		d, err := parseBool(c, "detail")
		if err != nil {
			return err
		}
		if d != nil && minor(c) < 43 {
			return notAcceptable()
		}
		detail = d != nil && *d
	}
	return r.listIn(c, detail, path, fixed)
}

func (r *resource[T]) listCommon(c echo.Context, detail bool, path string) error {
	return r.listIn(c, detail, path, nil)
}

// listIn is listCommon within scope, store filters the request cannot
// change (the node of /v1/nodes/{id}/volume/connectors).
func (r *resource[T]) listIn(c echo.Context, detail bool, path string, scope map[string]string) error {
	p, err := parseListParams(c, r.sorted)
	if err != nil {
		return err
	}
	fields, err := parseFields(c, r.known, r.minVersion)
	if err != nil {
		return err
	}
	if fields != nil && detail {
		return badRequest("Can not specify ?detail=True and fields in the same request.")
	}
	if fields == nil && !detail {
		fields = r.listFields
	}
	filters, err := r.listQuery(c)
	if err != nil {
		return err
	}
	if scope != nil {
		if filters == nil {
			filters = map[string]string{}
		}
		maps.Copy(filters, scope)
	}
	if n := 0; len(r.exclusive) > 0 {
		for _, f := range r.exclusive {
			if _, ok := filters[r.filters[f].store]; ok || scope[f] != "" {
				n++
			}
		}
		if n > 1 {
			return badRequest("%s", r.exclusiveMsg)
		}
	}
	items, err := r.store.List(c.Request().Context(), store.Query{Filters: filters, Limit: p.limit, Marker: p.marker,
		SortKey: p.sortKey, SortDir: p.sortDir})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) && p.marker != "" {
			return badRequest("Marker %s could not be found.", p.marker)
		}
		return err
	}
	next := ""
	if len(items) > 0 {
		last := r.store.UUID(items[len(items)-1])
		next = nextLink(c, path, p, len(items), *last)
	}
	plan := planFields(r.wire, minor(c), fields)
	return sendList(c, r.name, len(items), next, func(w *objectWriter, i int) error {
		return r.write(c, w, items[i], plan)
	})
}

func (r *resource[T]) patch(c echo.Context) error {
	if minor(c) < r.patchSince {
		return &Error{Code: http.StatusMethodNotAllowed, Msg: "The API version does not allow updating " + r.name, bare: true}
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	ops, err := jsonpatch.ParseOps(body)
	if err != nil {
		return badRequest("Invalid patch: %v", err)
	}
	if err := checkPatchPaths(c, ops, r.patchable, r.minVersion); err != nil {
		return err
	}
	if err := checkMandatoryRemovals(ops, r.mandatory); err != nil {
		return err
	}
	id, err := r.ident(c)
	if err != nil {
		return err
	}
	ctx := withMinor(c.Request().Context(), minor(c))
	var tried T
	patched := func(v *T) (T, error) {
		updated := r.fresh()
		if err := applyPatch(v, r.fresh(), ops, &updated, r.name); err != nil {
			return updated, err
		}
		if r.keep != nil {
			r.keep(v, &updated)
		}
		if r.validate != nil {
			if err := r.validate(ctx, &updated); err != nil {
				return updated, err
			}
		}
		if r.guard != nil {
			if err := r.guard(ctx, &updated, "update"); err != nil {
				return updated, err
			}
		}
		tried = updated
		return updated, nil
	}
	var v *T
	if r.lock == nil && r.check == nil {
		v, err = r.store.Update(ctx, id, func(v *T) error {
			updated, err := patched(v)
			*v = updated
			return err
		})
	} else {
		v, err = r.patchChecked(ctx, id, patched)
	}
	if err != nil {
		return r.failedWrite(err, id, &tried)
	}
	return r.send(c, http.StatusOK, v, nil)
}

// patchChecked is patch under r.lock with r.check: the object as read is
// checked, and the write applies only if it is still that object (its
// writers hold the same lock, so a change meanwhile is a 409 to retry).
func (r *resource[T]) patchChecked(ctx context.Context, id string, patched func(v *T) (T, error)) (*T, error) {
	cur, err := r.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	var out *T
	err = r.locked(ctx, cur, func() (err error) {
		cur, err := r.store.Get(ctx, id)
		if err != nil {
			return err
		}
		updated, err := patched(cur)
		if err != nil {
			return err
		}
		if r.check != nil {
			if err := r.check(ctx, cur, &updated); err != nil {
				return err
			}
		}
		if r.taken != nil {
			defer func() {
				if e := r.taken(err, &updated); e != nil {
					err = e
				}
			}()
		}
		_, _, seen := r.store.Meta(cur)
		out, err = r.store.Update(ctx, id, func(v *T) error {
			if _, _, now := r.store.Meta(v); !sameStamp(*now, *seen) {
				return conflict("%s %s changed while this request was checked; please retry.", r.kind, id)
			}
			*v = updated
			return nil
		})
		return err
	})
	return out, err
}

func sameStamp(a, b *proto.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b.Time)
}

func (r *resource[T]) delete(c echo.Context) error {
	id, err := r.ident(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if r.guard != nil || r.deleting != nil || r.lock != nil || r.check != nil {
		cur, err := r.store.Get(ctx, id)
		if err != nil {
			return r.failed(err, id)
		}
		if r.guard != nil {
			if err := r.guard(ctx, cur, "deletion"); err != nil {
				return err
			}
		}
		if r.deleting != nil {
			if err := r.deleting(c, cur); err != nil {
				return r.failed(err, id)
			}
		}
		err = r.locked(ctx, cur, func() error {
			if r.check != nil {
				if err := r.check(ctx, cur, nil); err != nil {
					return err
				}
			}
			return r.store.Delete(ctx, id)
		})
		if err != nil {
			return r.failed(err, id)
		}
		return c.NoContent(http.StatusNoContent)
	}
	if err := r.store.Delete(ctx, id); err != nil {
		return r.failed(err, id)
	}
	return c.NoContent(http.StatusNoContent)
}
