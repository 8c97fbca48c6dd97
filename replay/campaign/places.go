package campaign

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/iotap/iotap/replay"
)

// target is an opened target.
type target struct {
	b replay.Backend
	// requests counts the backend's own requests (S3); nil for one that does not.
	requests replay.RequestCounter
	// dir is a directory target's path, whose storage client is sampled; "" for a remote
	// target (the replayer is the client).
	dir string
	// start is how the run starts (startLabel): "cold", "warm" or "".
	start string
	// copies are the targets of the copies replayed at once (Spec.Copies), each a part of b.
	copies []target
}

// open opens the place spec as a target.
func (c *Campaign) open(ctx context.Context, spec string) (target, error) {
	b, err := c.env.Places.Open(ctx, spec)
	if err != nil {
		return target{}, err
	}
	t := target{b: b}
	t.requests, _ = b.(replay.RequestCounter)
	if !c.env.Places.Remote(spec) {
		t.dir = spec
	}
	return t, nil
}

// openTargets opens every target, after checkPlaces, before touching any of them: a
// target must be empty unless Scratch or Prepare "skip". The targets opened are returned
// with the error too, for closeTargets.
func (c *Campaign) openTargets(ctx context.Context) ([]target, error) {
	s := &c.spec
	var targets []target
	for _, spec := range s.Targets {
		t, err := c.open(ctx, spec)
		if err != nil {
			return targets, err
		}
		targets = append(targets, t)
		if s.Prepare == "skip" || len(s.Stores) > 0 { // a store is checked instead (openStores)
			continue
		}
		if err := c.checkEmpty(ctx, t.b, spec); err != nil {
			return targets, err
		}
	}
	if s.Copies > 1 {
		for i := range targets {
			cs, err := c.openCopies(ctx, s.Targets[i])
			targets[i].copies = cs
			if err != nil {
				return targets, err
			}
		}
	}
	return targets, nil
}

// checkEmpty refuses a target that is not empty, unless Scratch.
func (c *Campaign) checkEmpty(ctx context.Context, b replay.Backend, spec string) error {
	empty, err := b.IsEmpty(ctx)
	if err != nil {
		return fmt.Errorf("replay: target %s: %w", spec, err)
	}
	if !empty && !c.spec.Scratch {
		return usageErrorf("--target %s is not empty: replay deletes what is there before each run; pass --scratch if it is a scratch area", spec)
	}
	return nil
}

// copySpec names copy k (from 1) of the place spec: a subdirectory or a key prefix.
func (c *Campaign) copySpec(spec string, k int) string {
	name := "copy" + strconv.Itoa(k)
	if c.env.Places.Remote(spec) {
		return strings.TrimRight(spec, "/") + "/" + name
	}
	return filepath.Join(spec, name)
}

// openCopies opens the copies of the target spec (creating their directories) and checks
// that each is empty unless Scratch or Prepare "skip".
func (c *Campaign) openCopies(ctx context.Context, spec string) ([]target, error) {
	var out []target
	for k := 1; k <= c.spec.Copies; k++ {
		cs := c.copySpec(spec, k)
		if !c.env.Places.Remote(cs) {
			if err := os.Mkdir(cs, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return out, fmt.Errorf("replay: copy %d: %w", k, err)
			}
			if fi, err := os.Lstat(cs); err != nil || !fi.IsDir() {
				return out, usageErrorf("--copies: %s exists and is not a directory", cs)
			}
		}
		t, err := c.open(ctx, cs)
		if err != nil {
			return out, err
		}
		out = append(out, t)
		if c.spec.Prepare == "skip" {
			continue
		}
		if err := c.checkEmpty(ctx, t.b, cs); err != nil {
			return out, err
		}
	}
	return out, nil
}

func (c *Campaign) closeTargets(targets []target) {
	for _, t := range targets {
		c.closeTargets(t.copies)
		if err := t.b.Close(); err != nil {
			c.env.Log.Warn("replay: close target", "target", t.b.Target().Path, "err", err)
		}
	}
}

// openStores opens the stores, one per target (nil entries without one), after
// checkStores. A store is emptied before the first run: it must be empty unless Scratch.
func (c *Campaign) openStores(ctx context.Context) ([]replay.Backend, error) {
	s := &c.spec
	stores := make([]replay.Backend, len(s.Targets))
	for i, spec := range s.Stores {
		b, err := c.env.Places.Open(ctx, spec)
		if err != nil {
			return stores, err
		}
		stores[i] = b
		empty, err := b.IsEmpty(ctx)
		if err != nil {
			return stores, fmt.Errorf("replay: store %s: %w", spec, err)
		}
		if !empty && !s.Scratch {
			return stores, usageErrorf("--prepare-via %s is not empty: replay deletes what is there before the first run; pass --scratch if it is a scratch area", spec)
		}
	}
	return stores, nil
}

func (c *Campaign) closeStores(stores []replay.Backend) {
	for _, b := range stores {
		if b == nil {
			continue
		}
		if err := b.Close(); err != nil {
			c.env.Log.Warn("replay: close store", "store", b.Target().Path, "err", err)
		}
	}
}

// preparedWhere names where the starting state of t was made.
func preparedWhere(t target, store replay.Backend) string {
	if store != nil {
		return store.Target().Path + " (behind " + t.b.Target().Path + ")"
	}
	return t.b.Target().Path
}
