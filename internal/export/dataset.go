package export

import (
	"strings"

	"github.com/iotap/iotap/trace"
)

// A dataset is the export of many traces: a file per trace in a Hive-style partitioned
// directory (or S3 prefix), host=HOST/job=JOB/TRACE_ID.EXT, which DuckDB, Spark, Trino and
// Athena read as one table with host and job as partition columns. A trace outside Slurm
// has job=__HIVE_DEFAULT_PARTITION__, which the engines read as NULL.

// HiveNull is the partition value engines read as NULL.
const HiveNull = "__HIVE_DEFAULT_PARTITION__"

// DatasetPath returns the path, relative to the dataset's root, of the file of the trace
// whose header is h, in the format of extension ext ("parquet").
func DatasetPath(h *trace.Header, ext string) string {
	id := identityOf(h)
	return "host=" + partitionValue(id.host) + "/job=" + partitionValue(id.job) + "/" + id.traceID + "." + ext
}

// partitionValue escapes a partition value as Hive does: '/', '=', '%', '"', '\\', control
// characters, bytes of non-ASCII and the characters file systems or URLs treat specially
// become %XX; "" is HiveNull.
func partitionValue(s string) string {
	if s == "" {
		return HiveNull
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || strings.IndexByte(`/=%"\:*?<>|#{}[]^'`, c) >= 0 || (c == '.' && i == 0) {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Extension returns the file name extension of a format's files ("parquet").
func Extension(format string) string {
	if format == "jsonl" {
		return "jsonl"
	}
	return format
}
