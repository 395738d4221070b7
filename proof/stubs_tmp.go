package proof

import "context"

func faultCases() []Case { return nil }
func Faults(ctx context.Context, cfg Config) (*Report, error) {
	return run(ctx, cfg, "faults", faultCases())
}
