package replay

import "context"

// PrepareTarget builds the starting state on b: it empties the root and runs Prepare as
// the phase PhasePrepare, then begins PhaseReplay (see Backend.BeginPhase).
func PrepareTarget(ctx context.Context, b Backend, st *State, fillRandom bool) error {
	b.BeginPhase(PhasePrepare)
	defer b.BeginPhase(PhaseReplay)
	if err := b.Reset(ctx); err != nil {
		return err
	}
	return Prepare(ctx, b, st, fillRandom)
}
