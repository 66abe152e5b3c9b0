package api

import "context"

type minorKey struct{}

// withMinor carries the request's microversion in ctx, for checks that
// see a context but not the request (a resource's validate).
func withMinor(ctx context.Context, m int) context.Context {
	return context.WithValue(ctx, minorKey{}, m)
}

// minorOf is the microversion withMinor stored; MaxMinor when none was.
func minorOf(ctx context.Context) int {
	if m, ok := ctx.Value(minorKey{}).(int); ok {
		return m
	}
	return MaxMinor
}
