package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/iotap/iotap/trace/stats"
)

func TestNiceTicks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		min, max float64
		want     []string // the labelled ticks
	}{
		{"seconds of a short trace", 0, 9.46, []string{"0", "2", "4", "6", "8"}},
		{"a fraction", 0, 0.47, []string{"0", "0.1", "0.2", "0.3", "0.4"}},
		{"an offset range", 9.3, 9.72, []string{"9.3", "9.4", "9.5", "9.6", "9.7"}},
		{"hundredths", 9.4, 9.5, []string{"9.4", "9.42", "9.44", "9.46", "9.48", "9.5"}},
		{"ops per second", 0, 51234, []string{"0", "10000", "20000", "30000", "40000", "50000"}},
		{"negative to positive", -1, 1, []string{"-1", "-0.5", "0", "0.5", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, tk := range niceTicks(tc.min, tc.max) {
				if tk.Value < tc.min-1e-9 || tk.Value > tc.max+1e-9 {
					t.Errorf("tick %v outside [%v, %v]", tk.Value, tc.min, tc.max)
				}
				if tk.Label != "" {
					got = append(got, tk.Label)
				}
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("labels %q, want %q", got, tc.want)
			}
		})
	}
	if ts := niceTicks(3, 3); len(ts) != 1 || ts[0].Label != "3" {
		t.Errorf("a single value: %+v", ts)
	}
	if ts := niceTicks(math.NaN(), math.NaN()); len(ts) != 0 {
		t.Errorf("NaN range: %+v", ts)
	}
}

func TestBytesTicks(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  float64
		want string
	}{
		// An 11.5 MiB file's offsets: 2 MiB steps, not 3.81/7.63/11.4 MiB.
		{"MiB", 11.5 * (1 << 20), "0MiB 2MiB 4MiB 6MiB 8MiB 10MiB"},
		{"KiB", 900 << 10, "0KiB 200KiB 400KiB 600KiB 800KiB"},
		{"bytes", 700, "0B 100B 200B 300B 400B 500B 600B 700B"},
		{"half GiB steps", 1.6 * (1 << 30), "0GiB 0.5GiB 1GiB 1.5GiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, tk := range (bytesTicks{}).Ticks(0, tc.max) {
				if tk.Label != "" {
					got = append(got, tk.Label)
				}
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("labels %q, want %q", strings.Join(got, " "), tc.want)
			}
		})
	}
}

var (
	svgRE   = regexp.MustCompile(`(?s)<svg.*?</svg>`)
	textRE  = regexp.MustCompile(`<text[^>]*>([^<]*)</text>`)
	colorRE = regexp.MustCompile(`(?:stroke|fill):#([0-9A-Fa-f]{6})`)
	// A tick label: a number, a unit or percent sign after it.
	tickRE = regexp.MustCompile(`^-?[0-9][0-9.]*(?:ns|µs|ms|s|%|B|KiB|MiB|GiB|TiB)?$`)
)

// TestHTMLPlots checks the figures of a real report: round tick labels, colours from the
// colour-blind-safe palette (or greys), and per-operation histograms on one latency axis.
func TestHTMLPlots(t *testing.T) {
	r, err := Build([]*stats.Stats{loadStats(t, "node1.iotap")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	ok := map[string]bool{"FFFFFF": true}
	for _, c := range palette {
		rgba := color.RGBAModel.Convert(c).(color.RGBA)
		ok[fmt.Sprintf("%02X%02X%02X", rgba.R, rgba.G, rgba.B)] = true
	}
	var hists []string
	svgs := svgRE.FindAllString(b.String(), -1)
	if len(svgs) < 10 {
		t.Fatalf("%d figures", len(svgs))
	}
	for _, s := range svgs {
		texts := textRE.FindAllStringSubmatch(s, -1)
		title := texts[0][1]
		var ticks []string
		for _, m := range texts[1:] {
			l := m[1]
			if !tickRE.MatchString(l) {
				continue
			}
			ticks = append(ticks, l)
			num := strings.TrimRightFunc(l, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
			if strings.Contains(num, ".") && (strings.HasSuffix(num, "0") || len(num)-strings.IndexByte(num, '.') > 3) {
				t.Errorf("%s: tick label %q is not round", title, l)
			}
			if _, err := strconv.ParseFloat(num, 64); err != nil {
				t.Errorf("%s: tick label %q: %v", title, l, err)
			}
		}
		heat := strings.HasPrefix(title, "Heat map")
		for _, m := range colorRE.FindAllStringSubmatch(s, -1) {
			c := strings.ToUpper(m[1])
			if heat && onRamp(c) {
				continue
			}
			if grey := c[0:2] == c[2:4] && c[2:4] == c[4:6]; !ok[c] && !grey {
				t.Errorf("%s: colour #%s is neither in the palette nor a grey", title, c)
			}
		}
		if strings.Contains(title, "latency histogram") {
			// The x ticks are the duration labels (the y axis counts ops).
			var x []string
			for _, l := range ticks {
				if strings.HasSuffix(l, "s") {
					x = append(x, l)
				}
			}
			hists = append(hists, title+": "+strings.Join(x, " "))
		}
	}
	if len(hists) < 2 {
		t.Fatalf("%d histograms", len(hists))
	}
	axis := func(h string) string { return h[strings.Index(h, ": ")+2:] }
	for _, h := range hists[1:] {
		if axis(h) != axis(hists[0]) {
			t.Errorf("histograms on different latency axes:\n%s\n%s", hists[0], h)
		}
	}
	if a := axis(hists[0]); !strings.Contains(a, "1µs") || !strings.Contains(a, "1ms") {
		t.Errorf("histogram axis %q", a)
	}
}

// TestPalette checks the line colours: no two alike, and no pure red or green, the pair
// that red-green colour blindness (1 man in 12) cannot tell apart.
func TestPalette(t *testing.T) {
	hue := func(c color.RGBA) float64 {
		r, g, b := float64(c.R)/255, float64(c.G)/255, float64(c.B)/255
		mx, mn := math.Max(r, math.Max(g, b)), math.Min(r, math.Min(g, b))
		var h float64
		if mx == mn {
			return -1 // a grey
		}
		switch mx {
		case r:
			h = math.Mod((g-b)/(mx-mn), 6)
		case g:
			h = (b-r)/(mx-mn) + 2
		default:
			h = (r-g)/(mx-mn) + 4
		}
		return math.Mod(h*60+360, 360)
	}
	for i := range 8 {
		a := color.RGBAModel.Convert(color8(i)).(color.RGBA)
		if h := hue(a); h >= 0 && (h < 20 || h > 340 || (h > 90 && h < 150)) {
			t.Errorf("colour %d %v: hue %.0f° is a red or a green", i, a, h)
		}
		for j := i + 1; j < 8; j++ {
			b := color.RGBAModel.Convert(color8(j)).(color.RGBA)
			d := math.Sqrt(sq(int(a.R)-int(b.R)) + sq(int(a.G)-int(b.G)) + sq(int(a.B)-int(b.B)))
			if d < 60 {
				t.Errorf("colours %d %v and %d %v are %.0f apart", i, a, j, b, d)
			}
		}
	}
}

func sq(i int) float64 { return float64(i * i) }

// onRamp reports whether the colour (hex RRGGBB) is on the heat maps' colour scale: between
// two neighbouring colours of heatRamp, within rounding.
func onRamp(hex string) bool {
	var c [3]float64
	for i := range c {
		v, err := strconv.ParseUint(hex[2*i:2*i+2], 16, 8)
		if err != nil {
			return false
		}
		c[i] = float64(v)
	}
	for i := 0; i+1 < len(heatRamp); i++ {
		a, b := heatRamp[i], heatRamp[i+1]
		ax := [3]float64{float64(a.R), float64(a.G), float64(a.B)}
		bx := [3]float64{float64(b.R), float64(b.G), float64(b.B)}
		// The t that best fits, then every channel within one step of it.
		var num, den float64
		for k := range 3 {
			num += (c[k] - ax[k]) * (bx[k] - ax[k])
			den += (bx[k] - ax[k]) * (bx[k] - ax[k])
		}
		t := num / den
		if t < -0.01 || t > 1.01 {
			continue
		}
		fits := true
		for k := range 3 {
			if math.Abs(ax[k]+t*(bx[k]-ax[k])-c[k]) > 1.5 {
				fits = false
			}
		}
		if fits {
			return true
		}
	}
	return false
}
