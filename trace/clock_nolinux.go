//go:build !linux

package trace

func kernelClockIsTSC() bool { return false }
