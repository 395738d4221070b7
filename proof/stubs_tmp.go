package proof

import "context"

func disclosureCases() []Case { return nil }
func faultCases() []Case      { return nil }
func Faults(ctx context.Context, cfg Config) (*Report, error) {
	return run(ctx, cfg, "faults", faultCases())
}
