package slurm

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrNotInStep is returned by [TaskFromEnv] outside a Slurm job step (SLURM_PROCID unset).
var ErrNotInStep = errors.New("not running in a Slurm job step (SLURM_PROCID is not set; start it with srun)")

// Task is one task's place in a Slurm job step, as Slurm's environment describes it.
type Task struct {
	JobID    string // SLURM_JOB_ID
	StepID   string // SLURM_STEP_ID
	ProcID   int    // SLURM_PROCID: the task's rank in the step, 0..NTasks-1
	NTasks   int    // SLURM_NTASKS (SLURM_NPROCS on old versions)
	NodeID   int    // SLURM_NODEID: the node's index in the job, 0-based
	LocalID  int    // SLURM_LOCALID: the task's index on its node
	NodeName string // SLURMD_NODENAME
}

// TaskFromEnv reads the task's place from Slurm's environment variables through getenv
// (os.Getenv). Outside a step it returns ErrNotInStep.
func TaskFromEnv(getenv func(string) string) (Task, error) {
	if getenv("SLURM_PROCID") == "" {
		return Task{}, ErrNotInStep
	}
	t := Task{JobID: getenv("SLURM_JOB_ID"), StepID: getenv("SLURM_STEP_ID"), NodeName: getenv("SLURMD_NODENAME")}
	ntasks := getenv("SLURM_NTASKS")
	if ntasks == "" {
		ntasks = getenv("SLURM_NPROCS")
	}
	var err error
	num := func(name, v string, dst *int, optional bool) {
		if err != nil || (v == "" && optional) {
			return
		}
		n, e := strconv.Atoi(v)
		if e != nil || n < 0 {
			err = fmt.Errorf("slurm environment: %s=%q is not a task number", name, v)
			return
		}
		*dst = n
	}
	num("SLURM_PROCID", getenv("SLURM_PROCID"), &t.ProcID, false)
	num("SLURM_NTASKS", ntasks, &t.NTasks, false)
	num("SLURM_NODEID", getenv("SLURM_NODEID"), &t.NodeID, true)
	num("SLURM_LOCALID", getenv("SLURM_LOCALID"), &t.LocalID, true)
	if err != nil {
		return Task{}, err
	}
	if t.NTasks < 1 || t.ProcID >= t.NTasks {
		return Task{}, fmt.Errorf("slurm environment: task %d of %d tasks is out of range", t.ProcID, t.NTasks)
	}
	return t, nil
}
