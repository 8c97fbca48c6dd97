// Package s3store stores and fetches iotap traces on S3 and builds the S3 clients that
// iotap uses (trace storage here, the replay target in package replay/s3).
//
// # URLs
//
// An S3 location is written s3://bucket/key. A key ending in "/" (or empty) is a prefix.
// ParseURL refuses an empty bucket, a key with an empty, "." or ".." component, and a
// key that starts with "/": iotap never writes outside the prefix it was given.
//
// # Errors
//
// Classify translates SDK errors where they enter, with errors.As on the typed errors
// (never on message text): a missing key becomes fs.ErrNotExist, AccessDenied
// fs.ErrPermission, a missing bucket ErrNoBucket, throttling and 5xx ErrThrottled.
//
// # Traces written to S3
//
// Create returns a writer that keeps a trace on S3 while it is written, so that a crash
// loses at most the last FlushInterval of it:
//
//   - The data is cut into segments, objects KEY.seg/000001, KEY.seg/000002, ... A segment
//     is sealed (uploaded one last time, then never touched) when it reaches PartSize
//     (default 8 MiB, at least 5 MiB). The open segment is uploaded again, whole, every
//     FlushInterval (default 5 s) while new data has arrived: a rewrite costs at most
//     PartSize per interval, whatever the trace's size.
//   - Close composes the segments into KEY with a multipart upload, one part per segment
//     (UploadPartCopy, server side; servers without it get a download and re-upload), and
//     deletes them. A trace that fits in one segment is written to KEY with one PutObject.
//   - After a crash KEY is missing and the segments hold everything up to the last flush:
//     Open and List read such a trace as the concatenation of its segments, and the
//     trace reader reports the missing tail as a truncation.
package s3store
