#!/bin/sh
# A small genomics-like job, run in the current directory with relative paths only:
#   - generate a SAM file of WORKLOAD_READS reads (deterministic),
#   - samtools view -b, sort, index, flagstat, idxstats and a region count,
#   - tar create (reproducible: sorted names, fixed mtime and owner) and extract,
#   - a sqlite3 workload (import, index, queries, dump).
# Two runs on different storage must give byte-identical outputs; iotap's tests and demo
# check that. Needs awk, samtools, tar, sqlite3.
set -eu
N=${WORKLOAD_READS:-20000}

awk -v n="$N" 'BEGIN {
  srand(42)
  print "@HD\tVN:1.6\tSO:unsorted"
  print "@SQ\tSN:chr1\tLN:1000000"
  print "@SQ\tSN:chr2\tLN:500000"
  split("A C G T", b, " ")
  for (i = 0; i < n; i++) {
    chr = (i % 3 == 0) ? "chr2" : "chr1"
    pos = int(rand() * 400000) + 1
    seq = ""; q = ""
    for (j = 0; j < 100; j++) { seq = seq b[int(rand() * 4) + 1]; q = q "I" }
    flag = (rand() < 0.5) ? 0 : 16
    mapq = int(rand() * 61)
    printf "read%07d\t%d\t%s\t%d\t%d\t100M\t*\t0\t0\t%s\t%s\n", i, flag, chr, pos, mapq, seq, q
  }
}' > reads.sam

samtools view -b -o reads.bam reads.sam
samtools sort -m 8M -o reads.sorted.bam reads.bam
samtools index reads.sorted.bam
samtools flagstat reads.sorted.bam > flagstat.txt
samtools idxstats reads.sorted.bam > idxstats.txt
samtools view -c -q 30 reads.sorted.bam chr1:1000-200000 > region.count

mkdir -p tree/a tree/b
i=1
while [ "$i" -le 50 ]; do echo "file $i" > "tree/a/f$i"; i=$((i + 1)); done
cp reads.sam tree/b/reads.sam
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf archive.tar tree
rm -rf extract && mkdir extract
tar -xf archive.tar -C extract

samtools view reads.sorted.bam | cut -f 1-5 > reads.tsv
rm -f reads.db
sqlite3 reads.db <<'SQL'
CREATE TABLE reads(name TEXT, flag INT, chr TEXT, pos INT, mapq INT);
.mode tabs
.import reads.tsv reads
CREATE INDEX reads_pos ON reads(chr, pos);
BEGIN;
UPDATE reads SET mapq = mapq + 1 WHERE mapq < 10;
DELETE FROM reads WHERE pos % 97 = 0;
COMMIT;
SQL
sqlite3 reads.db "SELECT chr, count(*), sum(pos), avg(mapq) FROM reads GROUP BY chr ORDER BY chr;" > sqlite.out
sqlite3 reads.db "SELECT name FROM reads WHERE chr = 'chr1' AND pos BETWEEN 1000 AND 5000 ORDER BY pos, name;" >> sqlite.out
sqlite3 reads.db .dump > dump.sql
echo "workload done: $N reads"
