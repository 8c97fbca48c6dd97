package report

import (
	"encoding/json"
	"io"
)

// WriteJSON renders r as indented JSON (schema iotap.report/v1, see doc.go).
func WriteJSON(w io.Writer, r *Report) error { return writeJSON(w, r) }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
