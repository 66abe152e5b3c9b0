// Package proto is Kiln's wire contract: the Ironic-compatible REST types the
// controller serves and the ironic-python-agent protocol types the controller and
// kiln-agent exchange. It holds types and names only, no I/O, so that both
// programs (and their tests) agree on one spelling of every JSON field.
package proto
