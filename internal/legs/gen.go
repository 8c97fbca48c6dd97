package legs

// legs.bpf.o is built from legs.bpf.c with Debian's clang-14 (apt install clang-14
// libbpf-dev) and committed, so that building iotap needs no C compiler. After a change to
// the C source, run go generate and commit both files.
//
//go:generate clang-14 -O2 -g -target bpf -I/usr/include/x86_64-linux-gnu -c legs.bpf.c -o legs.bpf.o
//go:generate llvm-strip-14 -g legs.bpf.o
