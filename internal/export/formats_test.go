package export

import (
	"bytes"
	"testing"

	"github.com/iotap/iotap/trace"
)

// TestRowFormats: JSON lines and CSV write each type of value, and NULL, as docs/export.md
// says: numbers in decimal, booleans, times in RFC 3339 with nanoseconds (UTC), labels as a
// JSON object, names as their bytes (CSV) or escaped (JSON), NULL as null or an empty field.
func TestRowFormats(t *testing.T) {
	cols := []Column{
		{Name: "n", Type: Int}, {Name: "z", Type: Int, Nullable: true}, {Name: "b", Type: Bool},
		{Name: "t", Type: Time}, {Name: "s", Type: String, Nullable: true}, {Name: "p", Type: Name},
		{Name: "l", Type: Labels},
	}
	row := []Value{
		{Int: -42}, {Null: true}, {Int: 1}, {Int: 1_764_547_200_000_000_007}, {Null: true}, {Str: "a,\"b\"\xff"},
		{Labels: []trace.Label{{Key: "k", Value: "v"}, {Key: "q\"", Value: "1"}, {Key: "k", Value: "second"}}},
	}
	for _, tc := range []struct {
		format string
		want   string
	}{
		{"jsonl", `{"n":-42,"z":null,"b":true,"t":"2025-12-01T00:00:00.000000007Z","s":null,"p":"a,\"b\"\udcff","l":{"k":"v","q\"":"1"}}` + "\n" +
			`{"n":-42,"z":null,"b":true,"t":"2025-12-01T00:00:00.000000007Z","s":null,"p":"a,\"b\"\udcff","l":{"k":"v","q\"":"1"}}` + "\n"},
		{"csv", "n,z,b,t,s,p,l\n" +
			`-42,,true,2025-12-01T00:00:00.000000007Z,,"a,""b""` + "\xff" + `","{""k"":""v"",""q\"""":""1""}"` + "\n" +
			`-42,,true,2025-12-01T00:00:00.000000007Z,,"a,""b""` + "\xff" + `","{""k"":""v"",""q\"""":""1""}"` + "\n"},
	} {
		t.Run(tc.format, func(t *testing.T) {
			f, _ := FormatNamed(tc.format)
			var out bytes.Buffer
			rw, err := f.Rows(&out, Table{View: "test", Columns: cols})
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second row from the caches of labels and times
				if err := rw.Write(row); err != nil {
					t.Fatal(err)
				}
			}
			if err := rw.Close(); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", out.String(), tc.want)
			}
		})
	}
}
