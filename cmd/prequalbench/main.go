// Command prequalbench is the ingress, the campaign orchestrator and the
// reporter of the prequalbench project. This package is wiring only: flags
// go into a private struct and are mapped to calls into the packages.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "prequalbench:", err)
		os.Exit(exitCode(err))
	}
}
