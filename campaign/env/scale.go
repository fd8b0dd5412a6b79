package env

import "context"

// Scaler is implemented by environments that can change a backend group's
// replica count while load runs (a scenario's churn block). ScaleGroup
// returns once the ingress routes to exactly the new replicas; replicas
// it removes are stopped only after every ingress replica has dropped
// them, so no request is sent to a stopping backend.
type Scaler interface {
	ScaleGroup(ctx context.Context, group string, replicas int) error
}
