package conductor

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"sort"
	"strconv"
)

// Ring maps node UUIDs onto conductors by consistent hashing: each conductor
// owns many points on a circle, a node belongs to the first point at or after
// its own hash. When a conductor joins or leaves, only the nodes between its
// points and their neighbours move.
type Ring struct {
	points  []uint64
	owners  map[uint64]string
	members []string
}

// replicas is the number of points per conductor; more points spread nodes
// more evenly (256 keeps each of 3 conductors within about ±15 % of a third).
const replicas = 256

func hash64(s string) uint64 {
	sum := sha256.Sum256([]byte(s))
	return binary.BigEndian.Uint64(sum[:8])
}

// NewRing builds a ring over members; order and duplicates do not matter.
func NewRing(members []string) *Ring {
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	r := &Ring{owners: make(map[uint64]string, len(ms)*replicas), members: ms}
	for _, m := range ms {
		for i := range replicas {
			p := hash64(m + "#" + strconv.Itoa(i))
			if _, taken := r.owners[p]; taken {
				continue
			}
			r.owners[p] = m
			r.points = append(r.points, p)
		}
	}
	sort.Slice(r.points, func(i, j int) bool { return r.points[i] < r.points[j] })
	return r
}

// Owner returns the member that owns key, or "" for an empty ring.
func (r *Ring) Owner(key string) string {
	if len(r.points) == 0 {
		return ""
	}
	h := hash64(key)
	i := sort.Search(len(r.points), func(i int) bool { return r.points[i] >= h })
	if i == len(r.points) {
		i = 0
	}
	return r.owners[r.points[i]]
}

// Members returns the ring's members, sorted.
func (r *Ring) Members() []string { return slices.Clone(r.members) }
