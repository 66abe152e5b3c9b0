package api

import "sync"

// Most requests ask for every field: their plan depends only on the wire
// fields and the microversion, so it is built once per pair and shared
// (planFields built it, a map of every field's name, per request: an
// eighth of a node GET's CPU, profiled). Plans are read-only.

type planKey struct {
	all   *wireField // the first of the wire fields
	minor int
}

var planCache sync.Map // planKey → fieldPlan

// cachedPlan is planFields(all, minor, nil), built once.
func cachedPlan(all []wireField, minor int) fieldPlan {
	if len(all) == 0 {
		return fieldPlan{}
	}
	k := planKey{&all[0], minor}
	if p, ok := planCache.Load(k); ok {
		return p.(fieldPlan)
	}
	p := buildPlan(all, minor, nil)
	planCache.Store(k, p)
	return p
}
