// Loading the program into the kernel, in as little time as a recording's start can give
// it: the kernel's BTF is read once while the maps are made, and the kernel verifies the
// programs on every CPU at once.

package legs

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
)

// program is one program of the object file, and the field of objects that keeps it.
type program struct {
	name string
	p    **ebpf.Program
}

// programs are the programs a Tracer with o loads and attaches: those of the legs; with
// data calls, those of asynchronous I/O and, where mapped files can be followed (maps is
// ""), those of their faults; for a job alone (Options.JobOnly), the one that follows its
// processes. A program loaded is attached: the kernel verifies no program left unused.
func (obj *objects) programs(o Options, maps string) []program {
	ps := []program{
		{legsProgRequestSend, &obj.RequestSend},
		{legsProgRequestEnd, &obj.RequestEnd},
		{legsProgSchedWaking, &obj.SchedWaking},
		{legsProgSysEnter, &obj.SysEnter},
		{legsProgSysExit, &obj.SysExit},
	}
	if o.DataCalls {
		ps = append(ps, program{legsProgUringSubmit, &obj.UringSubmit}, program{legsProgUringComplete, &obj.UringComplete})
		if maps == "" {
			ps = append(ps, obj.faultPrograms()...)
		}
	}
	if o.JobOnly {
		ps = append(ps, program{legsProgProcessFork, &obj.ProcessFork})
	}
	return ps
}

// faultPrograms are the programs that follow the faults of mapped files; they attach to
// faultTracepoints.
func (obj *objects) faultPrograms() []program {
	return []program{
		{legsProgFilemapFault, &obj.FilemapFault},
		{legsProgFilemapMapPages, &obj.FilemapMapPages},
		{legsProgDirtyFolio, &obj.DirtyFolio},
	}
}

// load makes spec's maps and variables, and loads and attaches the programs o asks for
// into t.objs and t.links. The kernel's BTF, which every program's relocations and attach
// point need, is read into a cache the loads share, while the object's maps are made; it
// also tells which programs the kernel can run (passthroughKernel, with data calls). The
// programs are then loaded on as many threads as the machine has CPUs, the longest first:
// the kernel verifies a program in the thread that loads it, and that is most of the
// time. Each program is attached once loaded. On error, nothing is left loaded.
func (t *Tracer) load(spec *ebpf.CollectionSpec, o Options) (err error) {
	cache := btf.NewCache()
	kernel := make(chan error, 1)
	go func() {
		k, err := cache.Kernel()
		if err != nil {
			kernel <- fmt.Errorf("legs: the kernel's BTF: %w", err)
			return
		}
		if o.DataCalls {
			t.maps, err = passthroughKernel(k)
		}
		kernel <- err
	}()
	onlyMaps := spec.Copy()
	onlyMaps.Programs = nil
	coll, merr := ebpf.NewCollectionWithOptions(onlyMaps, ebpf.CollectionOptions{Cache: cache})
	if kerr := <-kernel; kerr != nil {
		if merr == nil {
			coll.Close()
		}
		return kerr
	}
	if merr != nil {
		return fmt.Errorf("legs: load program into the kernel: %w", merr)
	}
	defer coll.Close() // what is not assigned to t.objs: the data sections' maps
	defer func() {
		if err != nil {
			t.detach()
		}
	}()
	ps := t.objs.programs(o, t.maps)
	t.links = make([]link.Link, len(ps))
	if err := loadPrograms(spec, ps, coll.Maps, cache, t.links); err != nil {
		return err
	}
	if err := coll.Assign(&struct {
		*legsMaps
		*legsVariables
	}{&t.objs.legsMaps, &t.objs.legsVariables}); err != nil {
		return fmt.Errorf("legs: load program into the kernel: %w", err)
	}
	return nil
}

// loadPrograms loads the programs ps of spec with the maps already made, each on the
// first free one of a thread per CPU (the longest first), and attaches each into links
// (indexed as ps). It returns the first error; the programs and links it made are then in
// ps and links, for the caller to free.
func loadPrograms(spec *ebpf.CollectionSpec, ps []program, maps map[string]*ebpf.Map, cache *btf.Cache, links []link.Link) error {
	order := make([]int, len(ps))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(insns(spec, ps[b].name), insns(spec, ps[a].name))
	})
	next := make(chan int, len(order))
	for _, i := range order {
		next <- i
	}
	close(next)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex // guards first
		first error
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
	}
	for range min(runtime.NumCPU(), len(ps)) {
		// Each thread loads from a copy of the spec: a load reads and copies parts of it.
		own := spec.Copy()
		wg.Go(func() {
			for i := range next {
				mu.Lock()
				failed := first != nil
				mu.Unlock()
				if failed {
					return
				}
				p, err := loadProgram(own, ps[i].name, maps, cache)
				if err != nil {
					fail(err)
					return
				}
				*ps[i].p = p
				l, err := link.AttachTracing(link.TracingOptions{Program: p})
				if err != nil {
					fail(fmt.Errorf("legs: attach %s: %w", p, err))
					return
				}
				links[i] = l
			}
		})
	}
	wg.Wait()
	return first
}

// loadProgram loads the program name of spec, which uses the maps already made.
func loadProgram(spec *ebpf.CollectionSpec, name string, maps map[string]*ebpf.Map, cache *btf.Cache) (*ebpf.Program, error) {
	if spec.Programs[name] == nil {
		return nil, fmt.Errorf("legs: the object has no program %s", name)
	}
	one := &ebpf.CollectionSpec{Maps: spec.Maps, Programs: map[string]*ebpf.ProgramSpec{name: spec.Programs[name]},
		Types: spec.Types, ByteOrder: spec.ByteOrder}
	coll, err := ebpf.NewCollectionWithOptions(one, ebpf.CollectionOptions{MapReplacements: maps, Cache: cache})
	if err != nil {
		return nil, fmt.Errorf("legs: load program into the kernel: %w", err)
	}
	defer coll.Close() // its copies of the maps
	return coll.DetachProgram(name), nil
}

// insns is the length of the program name of spec, in instructions (0 if it has none).
func insns(spec *ebpf.CollectionSpec, name string) int {
	if p := spec.Programs[name]; p != nil {
		return len(p.Instructions)
	}
	return 0
}

// closeLinks detaches the programs of links (nil ones are skipped) all at once: each
// detach waits for the kernel to stop running the program, and those waits overlap.
func closeLinks(links []link.Link) {
	var wg sync.WaitGroup
	for _, l := range links {
		if l != nil {
			wg.Go(func() { _ = l.Close() })
		}
	}
	wg.Wait()
}
