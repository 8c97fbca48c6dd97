package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strconv"
	"strings"

	"github.com/iotap/iotap/internal/format"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// newPlot returns a plot with sans-serif text and a light grid.
func newPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	for _, st := range []*draw.TextStyle{&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle, &p.X.Tick.Label, &p.Y.Tick.Label, &p.Legend.TextStyle} {
		st.Font.Variant = "Sans"
	}
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	g := plotter.NewGrid()
	g.Vertical.Color = color.Gray{Y: 225}
	g.Horizontal.Color = color.Gray{Y: 225}
	p.Add(g)
	return p
}

// svg renders p as an SVG fragment for inline use (no XML prolog).
func svg(p *plot.Plot, w, h vg.Length) (string, error) {
	wt, err := p.WriterTo(w, h, "svg")
	if err != nil {
		return "", fmt.Errorf("report: render plot %q: %w", p.Title.Text, err)
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return "", fmt.Errorf("report: render plot %q: %w", p.Title.Text, err)
	}
	s := b.String()
	if i := strings.Index(s, "<svg"); i >= 0 {
		s = s[i:]
	}
	return s, nil
}

// durTicks labels a log-scaled nanosecond axis with 1µs, 10µs, 100µs, 1ms ...
type durTicks struct{}

func (durTicks) Ticks(min, max float64) []plot.Tick {
	if min <= 0 {
		min = 1
	}
	var ts []plot.Tick
	for e := math.Floor(math.Log10(min)); math.Pow(10, e) <= max*1.0001; e++ {
		base := math.Pow(10, e)
		for m := 1.0; m < 10; m++ {
			v := m * base
			if v < min*0.9999 || v > max*1.0001 {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 {
				t.Label = trimZeros(format.Dur(int64(v)))
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// trimZeros drops the zero decimals of a formatted figure: "1.00ms" is "1ms", "10.0µs" is
// "10µs", "2.50s" is "2.5s".
func trimZeros(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(s)
	}
	m := s[:i]
	if !strings.Contains(m, ".") {
		return s
	}
	m = strings.TrimRight(strings.TrimRight(m, "0"), ".")
	return m + s[i:]
}

// bytesTicks labels a linear byte axis in one binary unit, with round steps of it:
// 0, 2MiB, 4MiB, ... rather than 3.81MiB, 7.63MiB.
type bytesTicks struct{}

func (bytesTicks) Ticks(min, max float64) []plot.Tick {
	unit, name := 1.0, "B"
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB", "PiB"} {
		if max < unit*1024 {
			break
		}
		unit, name = unit*1024, u
	}
	ts := niceTicks(min/unit, max/unit)
	for i := range ts {
		ts[i].Value *= unit
		if ts[i].Label != "" {
			ts[i].Label += name
		}
	}
	return ts
}

// niceTicks places ticks on [min, max] at a round step (1, 2 or 5 times a power of ten)
// giving 2 to 8 labelled ticks, with unlabelled ticks between, and labels each with the
// decimals the step needs (9.45, not 9.450000000000001).
func niceTicks(min, max float64) []plot.Tick {
	if !(max > min) || math.IsInf(max-min, 0) {
		if math.IsNaN(min) || math.IsInf(min, 0) {
			return nil
		}
		return []plot.Tick{{Value: min, Label: strconv.FormatFloat(min, 'g', 6, 64)}}
	}
	step, minor := niceStep((max - min) / 7)
	scale := math.Pow(10, float64(max0(-int(math.Floor(math.Log10(step)+1e-9)))))
	var ts []plot.Tick
	first := math.Ceil(min/minor - 1e-9)
	for k := first; k*minor <= max+minor*1e-9; k++ {
		v := k * minor
		t := plot.Tick{Value: v}
		if r := math.Round(v / step); math.Abs(v/step-r) < 1e-6 {
			v = math.Round(r*step*scale) / scale
			if v == 0 {
				v = 0 // no "-0"
			}
			t.Value = v
			t.Label = strconv.FormatFloat(v, 'f', -1, 64)
		}
		ts = append(ts, t)
	}
	return ts
}

// niceStep returns the smallest round step (1, 2 or 5 times a power of ten) at least raw,
// and the minor step that divides it (a half, or a fifth of a 1).
func niceStep(raw float64) (step, minor float64) {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / p; {
	case f <= 1:
		return p, p / 5
	case f <= 2:
		return 2 * p, p
	case f <= 5:
		return 5 * p, p
	}
	return 10 * p, 2 * p
}

func max0(i int) int { return max(i, 0) }

// palette is Okabe and Ito's colour-blind-safe set ("Color Universal Design", 2008), ordered
// so that the first colours are told apart by every kind of colour vision: no two reds,
// no red beside a green. Yellow, the weakest on white, comes last.
var palette = []color.Color{
	color.RGBA{R: 0x00, G: 0x72, B: 0xB2, A: 0xFF}, // blue
	color.RGBA{R: 0xE6, G: 0x9F, B: 0x00, A: 0xFF}, // orange
	color.RGBA{R: 0x00, G: 0x00, B: 0x00, A: 0xFF}, // black
	color.RGBA{R: 0xCC, G: 0x79, B: 0xA7, A: 0xFF}, // reddish purple
	color.RGBA{R: 0x56, G: 0xB4, B: 0xE9, A: 0xFF}, // sky blue
	color.RGBA{R: 0xD5, G: 0x5E, B: 0x00, A: 0xFF}, // vermillion
	color.RGBA{R: 0x00, G: 0x9E, B: 0x73, A: 0xFF}, // bluish green
	color.RGBA{R: 0xF0, G: 0xE4, B: 0x42, A: 0xFF}, // yellow
}

// color8 returns the i-th colour of the palette; colours repeat from the ninth line on.
// The report's CDF and tail plots dash their eighth line and later ones (yellow, the
// weakest on white, is the eighth colour).
func color8(i int) color.Color { return palette[i%len(palette)] }

// binLo is where a bin starts on a log axis. The first bin, [0, 1µs), is drawn as wide as
// the others (a quarter of a power of two below 1 µs) rather than from an arbitrary small
// value, which would exaggerate it.
func binLo(b HistBin) float64 {
	if b.LoNs == 0 {
		return float64(b.HiNs) * math.Pow(2, -0.25)
	}
	return float64(b.LoNs)
}

// cdfXYs turns histogram bins into CDF points (latency ns, percent).
func cdfXYs(bins []HistBin) plotter.XYs {
	var total uint64
	for _, b := range bins {
		total += b.Count
	}
	if total == 0 {
		return nil
	}
	xys := plotter.XYs{{X: binLo(bins[0]), Y: 0}}
	var c uint64
	for _, b := range bins {
		c += b.Count
		xys = append(xys, plotter.XY{X: float64(b.HiNs), Y: 100 * float64(c) / float64(total)})
	}
	return xys
}

// cdfPlot overlays the CDFs of several latency distributions: the busiest operations of
// one report, or (sides) one operation on the sides of a comparison.
func cdfPlot(title string, names []string, bins [][]HistBin, sides bool) (*plot.Plot, error) {
	p := newPlot(title, "latency (log scale)", "% of ops at or below")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = durTicks{}
	p.Y.Min, p.Y.Max = 0, 100
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.XOffs = -vg.Points(4)
	p.Legend.YOffs = vg.Points(4)
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, n := range names {
		xys := cdfXYs(bins[i])
		if len(xys) == 0 {
			continue
		}
		lo, hi = math.Min(lo, xys[0].X), math.Max(hi, xys[len(xys)-1].X)
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("report: cdf %s: %w", n, err)
		}
		l.Color = color8(i)
		l.Width = vg.Points(1.6)
		switch {
		case sides && i > 0:
			// Sides of a comparison often coincide: dash the later ones so the
			// baseline stays visible underneath.
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(float64(2 + 2*i))}
		case !sides && i >= 7:
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		if sides && i == 0 {
			l.Width = vg.Points(2.6)
		}
		p.Add(l)
		p.Legend.Add(n, l)
	}
	if lo < hi {
		p.X.Min = math.Pow(10, math.Floor(math.Log10(lo)))
		p.X.Max = math.Pow(10, math.Ceil(math.Log10(hi)))
	}
	return p, nil
}

// histRange returns the latency axis shared by the histograms of several distributions:
// whole decades around all their bins, so that a narrow distribution still gets labelled
// ticks and the histograms of one figure can be read against each other.
func histRange(bins ...[]HistBin) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, bs := range bins {
		if len(bs) == 0 {
			continue
		}
		lo, hi = math.Min(lo, binLo(bs[0])), math.Max(hi, float64(bs[len(bs)-1].HiNs))
	}
	if !(lo < hi) {
		return 0, 0
	}
	return math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
}

// histPlot draws one latency histogram on the latency axis [lo, hi] (histRange).
func histPlot(title string, bins []HistBin, c color.Color, lo, hi float64) (*plot.Plot, error) {
	p := newPlot(title, "latency (log scale)", "ops")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = durTicks{}
	h := &plotter.Histogram{FillColor: c, LineStyle: draw.LineStyle{Color: color.Gray{Y: 60}, Width: vg.Points(0.4)}}
	for _, b := range bins {
		h.Bins = append(h.Bins, plotter.HistogramBin{Min: binLo(b), Max: float64(b.HiNs), Weight: float64(b.Count)})
	}
	if len(h.Bins) == 0 {
		return nil, nil
	}
	p.Add(h)
	p.Y.Min = 0
	p.Y.Tick.Marker = numTicks{}
	if !(lo < hi) {
		lo, hi = histRange(bins)
	}
	p.X.Min, p.X.Max = lo, hi
	return p, nil
}

// seriesPlot draws step lines over time. A NaN Y leaves a gap (no data in that interval).
func seriesPlot(title, ylabel string, names []string, series []plotter.XYs) (*plot.Plot, error) {
	p := newPlot(title, "time since start (s)", ylabel)
	p.X.Tick.Marker = numTicks{}
	p.Y.Tick.Marker = numTicks{}
	for i, n := range names {
		var first *plotter.Line
		for _, run := range runs(series[i]) {
			l, err := plotter.NewLine(run)
			if err != nil {
				return nil, fmt.Errorf("report: series %s: %w", n, err)
			}
			l.Color = color8(i)
			l.Width = vg.Points(1.2)
			l.StepStyle = plotter.PostStep
			p.Add(l)
			if first == nil {
				first = l
				p.Legend.Add(n, l)
			}
		}
	}
	p.Legend.Top = true
	p.Y.Min = 0
	if p.Y.Max > 0 {
		p.Y.Max *= 1.25 // headroom for the legend
	}
	return p, nil
}

// runs splits xys at NaN Ys into runs of points; each run keeps the X of the NaN point
// that ends it, so that the last step has its width.
func runs(xys plotter.XYs) []plotter.XYs {
	var out []plotter.XYs
	var cur plotter.XYs
	for _, xy := range xys {
		if math.IsNaN(xy.Y) {
			if len(cur) > 0 {
				cur = append(cur, plotter.XY{X: xy.X, Y: cur[len(cur)-1].Y})
				out = append(out, cur)
				cur = nil
			}
			continue
		}
		cur = append(cur, xy)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// numTicks labels a linear axis with plain numbers at round steps (0, 2.5, 5, 7.5 or
// 50000, 100000).
type numTicks struct{}

func (numTicks) Ticks(min, max float64) []plot.Tick { return niceTicks(min, max) }

// offsetPlot draws sampled offsets of one file over time.
func offsetPlot(t OffsetTrack) (*plot.Plot, error) {
	title := t.Path
	if t.Host != "" {
		title = t.Host + ":" + t.Path
	}
	if len(title) > 50 {
		title = "…" + title[len(title)-49:]
	}
	var nr, nw int
	for _, pt := range t.Points {
		if pt[3] != 0 {
			nw++
		} else {
			nr++
		}
	}
	kind := "reads and writes"
	switch {
	case nw == 0:
		kind = "reads"
	case nr == 0:
		kind = "writes"
	}
	sub := ""
	if t.Stride > 1 {
		sub = fmt.Sprintf(", 1 in %d ops", t.Stride)
	}
	p := newPlot(fmt.Sprintf("%s: %s (%s%s)", title, kind, format.Bytes(t.Bytes), sub), "time since start (s)", "offset")
	p.X.Tick.Marker = numTicks{}
	p.Y.Tick.Marker = bytesTicks{}
	var rd, wr plotter.XYs
	for _, pt := range t.Points {
		xy := plotter.XY{X: pt[0], Y: pt[1]}
		if pt[3] != 0 {
			wr = append(wr, xy)
		} else {
			rd = append(rd, xy)
		}
	}
	for i, x := range []struct {
		name string
		xys  plotter.XYs
	}{{"read", rd}, {"write", wr}} {
		if len(x.xys) == 0 {
			continue
		}
		s, err := plotter.NewScatter(x.xys)
		if err != nil {
			return nil, fmt.Errorf("report: offsets %s: %w", t.Path, err)
		}
		s.Color = color8(i)
		s.Radius = vg.Points(1.3)
		s.Shape = draw.CircleGlyph{}
		p.Add(s)
		if nr > 0 && nw > 0 {
			p.Legend.Add(x.name, s)
		}
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8)
	p.Y.Min = 0
	return p, nil
}

// tailXYs turns histogram bins into (latency ns, % of ops slower) steps for a log-log
// tail plot: the share holds from one bin edge to the next, and the last positive share
// runs to the end of the last bin (0 % cannot be shown on a log axis).
func tailXYs(bins []HistBin) plotter.XYs {
	var total uint64
	for _, b := range bins {
		total += b.Count
	}
	if total == 0 {
		return nil
	}
	xys := plotter.XYs{{X: binLo(bins[0]), Y: 100}}
	var c uint64
	for i, b := range bins {
		c += b.Count
		if c == total {
			if i > 0 {
				xys = append(xys, plotter.XY{X: float64(b.HiNs), Y: xys[len(xys)-1].Y})
			}
			break
		}
		xys = append(xys, plotter.XY{X: float64(b.HiNs), Y: 100 * float64(total-c) / float64(total)})
	}
	return xys
}

// tailPlot shows the latency tail: the share of ops slower than x, both axes logarithmic,
// so p99, p99.9 and p99.99 are equally visible (1 %, 0.1 %, 0.01 %).
func tailPlot(title string, names []string, bins [][]HistBin) (*plot.Plot, error) {
	p := newPlot(title, "latency (log scale)", "% of ops slower")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = durTicks{}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = pctTicks{}
	p.Legend.Top = false
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8)
	p.Legend.YOffs = vg.Points(4)
	lo, hi, ymin := math.Inf(1), math.Inf(-1), 100.0
	for i, n := range names {
		xys := tailXYs(bins[i])
		if len(xys) < 2 {
			continue
		}
		lo, hi = math.Min(lo, xys[0].X), math.Max(hi, xys[len(xys)-1].X)
		ymin = math.Min(ymin, xys[len(xys)-1].Y)
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("report: tail %s: %w", n, err)
		}
		l.Color = color8(i)
		l.Width = vg.Points(1.6)
		l.StepStyle = plotter.PostStep
		if i >= 7 {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(l)
		p.Legend.Add(n, l)
	}
	if !(lo < hi) {
		return nil, nil
	}
	p.X.Min = math.Pow(10, math.Floor(math.Log10(lo)))
	p.X.Max = math.Pow(10, math.Ceil(math.Log10(hi)))
	p.Y.Max = 100
	p.Y.Min = math.Pow(10, math.Floor(math.Log10(ymin)))
	return p, nil
}

// pctTicks labels a log-scaled percent axis: 100%, 10%, 1%, 0.1% ...
type pctTicks struct{}

func (pctTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(min)); math.Pow(10, e) <= max*1.0001; e++ {
		v := math.Pow(10, e)
		if v < min*0.9999 {
			continue
		}
		ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64) + "%"})
	}
	return ts
}

// inflightPlot draws the in-flight depth of the operations that overlapped, per interval:
// the time-weighted mean as a solid line and the largest depth dashed, in the same colour.
func inflightPlot(in *InflightIntervals) (*plot.Plot, error) {
	if in == nil || len(in.Ops) == 0 || in.WidthNs <= 0 {
		return nil, nil
	}
	p := newPlot("In-flight depth over time: mean per interval (max dashed)", "time since start (s)", "requests in flight")
	p.X.Tick.Marker = numTicks{}
	p.Y.Tick.Marker = numTicks{}
	w := float64(in.WidthNs) / 1e9
	var top float64
	for i, o := range in.Ops {
		mean := make(plotter.XYs, 0, len(o.Mean)+1)
		mx := make(plotter.XYs, 0, len(o.Max)+1)
		for k := range o.Mean {
			mean = append(mean, plotter.XY{X: float64(k) * w, Y: o.Mean[k]})
			mx = append(mx, plotter.XY{X: float64(k) * w, Y: float64(o.Max[k])})
			top = math.Max(top, float64(o.Max[k]))
		}
		end := float64(len(o.Mean)) * w // close the last step
		mean = append(mean, plotter.XY{X: end, Y: mean[len(mean)-1].Y})
		mx = append(mx, plotter.XY{X: end, Y: mx[len(mx)-1].Y})
		for j, xys := range []plotter.XYs{mean, mx} {
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, fmt.Errorf("report: in-flight %s: %w", o.Op, err)
			}
			l.Color = color8(i)
			l.Width = vg.Points(1.4)
			l.StepStyle = plotter.PostStep
			if j == 1 {
				l.Width = vg.Points(0.8)
				l.Dashes = []vg.Length{vg.Points(3), vg.Points(2)}
			} else {
				p.Legend.Add(o.Op, l)
			}
			p.Add(l)
		}
	}
	p.Legend.Top = true
	p.X.Min = 0
	p.Y.Min, p.Y.Max = 0, math.Max(top*1.3, 2) // headroom for the legend
	return p, nil
}
