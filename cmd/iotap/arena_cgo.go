//go:build cgo && linux

package main

// The address space of a cgo build.
//
// A cgo build of iotap links glibc. Its malloc gives each thread that finds the main arena
// busy an arena of its own, reserving 64 MiB of address space for each (up to 8 per CPU),
// and each thread the runtime starts through pthread_create reserves a stack of
// RLIMIT_STACK (8 MiB by default): enough more address space than a pure-Go build to fail
// under an address-space limit (ulimit -v, as batch schedulers set) that the pure-Go build
// meets (bench/addrspace.sh measures both; docs/manual.md states the minimum). iotap calls
// malloc only where cgo starts a thread or resolves a name, and its threads run Go code,
// which needs kilobytes of a system stack: so this constructor, which runs before any
// thread starts, keeps one arena and gives threads glibc's default stack for an unlimited
// RLIMIT_STACK (2 MiB on x86-64) when the limit asks for more.

/*
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>

__attribute__((constructor)) static void iotap_small_address_space(void) {
#ifdef M_ARENA_MAX
	mallopt(M_ARENA_MAX, 1);
#endif
	pthread_attr_t attr;
	size_t size;
	if (pthread_getattr_default_np(&attr) != 0) {
		return;
	}
	if (pthread_attr_getstacksize(&attr, &size) == 0 && size > (2 << 20)) {
		pthread_attr_setstacksize(&attr, 2 << 20);
		pthread_setattr_default_np(&attr);
	}
	pthread_attr_destroy(&attr);
}
*/
import "C"
