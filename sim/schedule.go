package sim

import "github.com/prequalbench/prequalbench/openloop"

// Phase kinds of the open loop, as in package load (both are openloop's).
const (
	KindConstant = openloop.KindConstant
	KindRamp     = openloop.KindRamp
	KindSteps    = openloop.KindSteps
	KindBurst    = openloop.KindBurst
)

// Phase is one segment of an open-loop schedule.
type Phase = openloop.Phase
