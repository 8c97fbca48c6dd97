package legs

// The BPF program is bpf/legs.bpf.c. bpf2go (github.com/cilium/ebpf/cmd/bpf2go, a tool of
// this module) compiles it with Debian's clang-14 for each architecture iotap builds for and
// writes the objects and their typed Go loaders (legs_<arch>_bpfel.go/.o), which are
// committed so that building iotap needs no C compiler. After a change to the C source, run
// `go generate ./internal/legs` (packages clang-14, llvm-14 and libbpf-dev) and commit the
// results; CI regenerates them and fails on a difference.
//
//go:generate go tool bpf2go -cc clang-14 -strip llvm-strip-14 -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -type req_rec -type call_rec -type data_rec -type counter -type rec_kind -type data_op legs bpf/legs.bpf.c -- -Ibpf
