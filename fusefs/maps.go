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

// delAll removes keys ks and rebuilds the shards' maps (a Go map keeps its peak size after
// deletes), for removals in bulk.
func (s *shardedMap[K, V]) delAll(ks []K) {
	for _, k := range ks {
		s.del(k)
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		m := make(map[K]V, len(sh.m))
		for k, v := range sh.m {
			m[k] = v
		}
		sh.m = m
		sh.mu.Unlock()
	}
}
