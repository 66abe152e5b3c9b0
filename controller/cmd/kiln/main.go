// Command kiln is Kiln's controller (`kiln serve`) and, in later releases, its
// operator CLI. The main only parses flags and wires packages together.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "kiln:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "kiln",
		Short:         "Kiln provisions bare-metal servers through an Ironic-compatible API",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd())
	return root
}
