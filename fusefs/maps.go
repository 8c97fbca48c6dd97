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

func (s *shardedMap[K, V]) shard(k K) *shard[K, V] { return &s.shards[shardIndex(k)] }

// shardIndex is the shard of key k.
func shardIndex[K ~uint32 | ~uint64](k K) uint64 { return (uint64(k) * 0x9E3779B97F4A7C15) >> 58 }

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

// delAll removes keys ks, for removals in bulk: each shard is locked once, and its map is
// rebuilt (a Go map keeps its peak size after deletes).
func (s *shardedMap[K, V]) delAll(ks []K) {
	var byShard [numShards][]K
	for _, k := range ks {
		byShard[shardIndex(k)] = append(byShard[shardIndex(k)], k)
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, k := range byShard[i] {
			delete(sh.m, k)
		}
		m := make(map[K]V, len(sh.m)) // not maps.Clone, which may keep the table's size
		for k, v := range sh.m {
			m[k] = v
		}
		sh.m = m
		sh.mu.Unlock()
	}
}
