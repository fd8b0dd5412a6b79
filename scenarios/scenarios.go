// Package scenarios embeds the scenario catalogue: one YAML file per
// scenario, named <scenario>.yaml. campaign/scenario decodes them.
package scenarios

import "embed"

// FS holds every catalogue scenario.
//
//go:embed *.yaml
var FS embed.FS
