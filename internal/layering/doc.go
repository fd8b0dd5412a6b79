// Package layering owns one rule of the module's shape: imports point one
// way. The orchestrator (campaign/) and the command (cmd/) sit on top, and no
// package below them imports either; its test walks the module and fails on
// an import that runs upward.
package layering
