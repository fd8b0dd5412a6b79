package main

import (
	"fmt"

	"github.com/prequalbench/prequalbench/internal/buildinfo"
	"github.com/spf13/cobra"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the module version, git revision and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := buildinfo.Read()
			fmt.Fprintf(cmd.OutOrStdout(), "prequalbench %s\n  revision %s%s\n  go       %s\n",
				info.Version, info.Revision, dirtyMark(info.Dirty), info.GoVersion)
			return nil
		},
	}
}

func dirtyMark(dirty bool) string {
	if dirty {
		return " (modified)"
	}
	return ""
}
