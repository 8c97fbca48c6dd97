package fusefs

import "sync"

const numShards = 64

// shardedMap is a map split into numShards independently locked shards. Lookups of present
// keys do not allocate.
type shardedMap[K ~uint32 | ~uint64, V any] struct {
	shards [numShards]shard[K, V]
}

type shard[K comparable, V any] struct {
	mu sync.RWMutex // guards m
	m  map[K]V
	_  [40]byte // keep shards on separate cache lines
}

func newShardedMap[K ~uint32 | ~uint64, V any]() *shardedMap[K, V] {
	s := &shardedMap[K, V]{}
	for i := range s.shards {
		s.shards[i].m = make(map[K]V)
	}
	return s
}

func (s *shardedMap[K, V]) shard(k K) *shard[K, V] {
	return &s.shards[(uint64(k)*0x9E3779B97F4A7C15)>>58]
}

func (s *shardedMap[K, V]) get(k K) (V, bool) {
	sh := s.shard(k)
	sh.mu.RLock()
	v, ok := sh.m[k]
	sh.mu.RUnlock()
	return v, ok
}

func (s *shardedMap[K, V]) set(k K, v V) {
	sh := s.shard(k)
	sh.mu.Lock()
	sh.m[k] = v
	sh.mu.Unlock()
}

// setIfAbsent stores v unless k is present and reports whether it stored.
func (s *shardedMap[K, V]) setIfAbsent(k K, v V) bool {
	sh := s.shard(k)
	sh.mu.RLock()
	_, ok := sh.m[k]
	sh.mu.RUnlock()
	if ok {
		return false
	}
	sh.mu.Lock()
	_, ok = sh.m[k]
	if !ok {
		sh.m[k] = v
	}
	sh.mu.Unlock()
	return !ok
}

func (s *shardedMap[K, V]) del(k K) (V, bool) {
	sh := s.shard(k)
	sh.mu.Lock()
	v, ok := sh.m[k]
	if ok {
		delete(sh.m, k)
	}
	sh.mu.Unlock()
	return v, ok
}

// update calls fn with the current value (and presence) under the shard lock; fn returns the
// new value and whether to keep it (false deletes).
func (s *shardedMap[K, V]) update(k K, fn func(v V, ok bool) (V, bool)) {
	sh := s.shard(k)
	sh.mu.Lock()
	v, ok := sh.m[k]
	nv, keep := fn(v, ok)
	if keep {
		sh.m[k] = nv
	} else if ok {
		delete(sh.m, k)
	}
	sh.mu.Unlock()
}
