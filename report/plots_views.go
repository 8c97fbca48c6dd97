package report

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/iotap/iotap/internal/format"
)

// heatRamp is the colour scale of the heat maps: from a pale tint of the palette's sky
// blue through its blue to a dark blue, so that the faintest cell that holds something
// still shows against the white of the empty ones, and order reads as lightness for any
// colour vision.
var heatRamp = []color.RGBA{
	{R: 0xE3, G: 0xF2, B: 0xFB, A: 0xFF},
	{R: 0x56, G: 0xB4, B: 0xE9, A: 0xFF}, // sky blue
	{R: 0x00, G: 0x72, B: 0xB2, A: 0xFF}, // blue
	{R: 0x00, G: 0x1F, B: 0x3A, A: 0xFF},
}

// rampAt is the colour at t in [0, 1] on heatRamp.
func rampAt(t float64) color.Color {
	t = math.Min(math.Max(t, 0), 1) * float64(len(heatRamp)-1)
	i := min(int(t), len(heatRamp)-2)
	f := t - float64(i)
	a, b := heatRamp[i], heatRamp[i+1]
	mix := func(x, y uint8) uint8 { return uint8(math.Round(float64(x) + f*(float64(y)-float64(x)))) }
	return color.RGBA{R: mix(a.R, b.R), G: mix(a.G, b.G), B: mix(a.B, b.B), A: 0xFF}
}

// logScale maps the values [lo, hi] (lo > 0) to [0, 1] on a log scale.
type logScale struct{ lo, hi float64 }

func (s logScale) at(v float64) float64 {
	if s.hi <= s.lo {
		return 1
	}
	return math.Log(v/s.lo) / math.Log(s.hi/s.lo)
}

// heatCells is a plotter of a heat map's cells: columns of width w (seconds), rows from
// the top; a cell that holds nothing is left blank.
type heatCells struct {
	vals  [][]float64 // [row][column]
	w     float64
	scale logScale
}

func (h *heatCells) Plot(c draw.Canvas, p *plot.Plot) {
	tx, ty := p.Transforms(&c)
	n := len(h.vals)
	for i, row := range h.vals {
		y0, y1 := ty(float64(n-1-i)+0.04), ty(float64(n-i)-0.04)
		for j, v := range row {
			if v <= 0 {
				continue
			}
			x0, x1 := tx(float64(j)*h.w), tx(float64(j+1)*h.w)
			r := vg.Rectangle{Min: vg.Point{X: x0, Y: y0}, Max: vg.Point{X: x1, Y: y1}}
			c.SetColor(rampAt(h.scale.at(v)))
			c.Fill(r.Path())
		}
	}
}

func (h *heatCells) DataRange() (xmin, xmax, ymin, ymax float64) {
	cols := 0
	if len(h.vals) > 0 {
		cols = len(h.vals[0])
	}
	return 0, float64(cols) * h.w, 0, float64(len(h.vals))
}

// colorKey is a plotter of a vertical colour key on a log axis from scale.lo to scale.hi.
type colorKey struct{ scale logScale }

func (k colorKey) Plot(c draw.Canvas, p *plot.Plot) {
	tx, ty := p.Transforms(&c)
	const steps = 64
	r := k.scale.hi / k.scale.lo
	for i := range steps {
		lo := k.scale.lo * math.Pow(r, float64(i)/steps)
		hi := k.scale.lo * math.Pow(r, float64(i+1)/steps)
		rect := vg.Rectangle{Min: vg.Point{X: tx(0), Y: ty(lo)}, Max: vg.Point{X: tx(1), Y: ty(hi)}}
		c.SetColor(rampAt((float64(i) + 0.5) / steps))
		c.Fill(rect.Path())
	}
}

func (k colorKey) DataRange() (xmin, xmax, ymin, ymax float64) {
	return 0, 1, k.scale.lo, k.scale.hi
}

// rowTicks labels the rows of a heat map, the first at the top.
type rowTicks []string

func (t rowTicks) Ticks(min, max float64) []plot.Tick {
	ts := make([]plot.Tick, len(t))
	for i, name := range t {
		ts[i] = plot.Tick{Value: float64(len(t)-1-i) + 0.5, Label: name}
	}
	return ts
}

// shortName cuts a row's name to n runes, keeping its end (where a path's file name is).
func shortName(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}

// bytesLogTicks labels a log-scaled byte axis at 1, 10 and 100 times the powers of 1024:
// 1B, 10B, 100B, 1KiB, 10KiB, ...
type bytesLogTicks struct{}

func (bytesLogTicks) Ticks(min, max float64) []plot.Tick {
	if min <= 0 {
		min = 1
	}
	var ts []plot.Tick
	for unit := 1.0; unit <= max*1.0001; unit *= 1024 {
		for _, m := range []float64{1, 10, 100} {
			v := m * unit
			if v < min*0.9999 || v > max*1.0001 {
				continue
			}
			ts = append(ts, plot.Tick{Value: v, Label: trimZeros(format.Bytes(uint64(v)))})
		}
	}
	return ts
}

// heatFigure draws one heat map of m: time in the storage, or (byBytes) bytes moved,
// with its colour key beside it, as one SVG fragment.
func heatFigure(m *HeatMap, byBytes bool) (figure, error) {
	what, unit := "time in the storage", "time"
	if byBytes {
		what, unit = "bytes read and written", "bytes"
	}
	title := fmt.Sprintf("Heat map by %s: %s per %s", m.By, what, trimZeros(format.Dur(m.WidthNs)))
	w := float64(m.WidthNs) / 1e9
	cells := &heatCells{w: w}
	lo, hi := math.Inf(1), 0.0
	var names []string
	for _, r := range m.Rows {
		if byBytes && r.Bytes == 0 || !byBytes && r.TotalNs == 0 {
			continue // a row with nothing to show
		}
		vals := make([]float64, m.Columns)
		for j := range vals {
			if byBytes {
				vals[j] = float64(r.ByCol[j])
			} else {
				vals[j] = float64(r.Ns[j])
			}
			if vals[j] > 0 {
				lo, hi = math.Min(lo, vals[j]), math.Max(hi, vals[j])
			}
		}
		cells.vals = append(cells.vals, vals)
		names = append(names, shortName(r.Name, 36))
	}
	if hi == 0 {
		return figure{}, nil
	}
	if lo == hi {
		lo = hi / 10
	}
	cells.scale = logScale{lo, hi}

	p := newPlot(title, "time since start (s)", "")
	p.X.Tick.Marker = numTicks{}
	p.Y.Tick.Marker = rowTicks(names)
	p.Y.Tick.Length = 0
	p.Add(cells)
	p.X.Min, p.X.Max = 0, float64(m.Columns)*w
	p.Y.Min, p.Y.Max = 0, float64(len(cells.vals))

	key := newPlot(unit, "", "")
	key.Title.TextStyle.Font.Size = vg.Points(10)
	key.HideX()
	key.Y.Scale = plot.LogScale{}
	if byBytes {
		key.Y.Tick.Marker = bytesLogTicks{}
	} else {
		key.Y.Tick.Marker = durTicks{}
	}
	key.Add(colorKey{cells.scale})
	key.Y.Min, key.Y.Max = lo, hi

	width, keyW := 17*vg.Centimeter, 2.6*vg.Centimeter
	// A map of a few rows keeps the height its colour key needs to label its decades.
	height := max(vg.Length(len(cells.vals))*0.62*vg.Centimeter+3.2*vg.Centimeter, 7.5*vg.Centimeter)
	c := vgsvg.New(width+keyW, height)
	dc := draw.New(c)
	p.Draw(draw.Crop(dc, 0, -keyW, 0, 0))
	key.Draw(draw.Crop(dc, width+0.3*vg.Centimeter, 0, 1.6*vg.Centimeter, -0.2*vg.Centimeter))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return figure{}, fmt.Errorf("report: render plot %q: %w", title, err)
	}
	s := b.String()
	if i := strings.Index(s, "<svg"); i >= 0 {
		s = s[i:]
	}
	return figure{Title: title, SVG: template.HTML(s)}, nil
}

// accessSizePlot draws the read and write calls per access-size bucket.
func accessSizePlot(rows []AccessSizeRow) (*plot.Plot, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	p := newPlot("Read and write calls by size (Darshan's buckets)", "bytes a call moved", "calls")
	p.Y.Tick.Marker = numTicks{}
	var names []string
	reads, writes := make(plotter.Values, len(rows)), make(plotter.Values, len(rows))
	for i, r := range rows {
		names = append(names, r.Bucket)
		reads[i], writes[i] = float64(r.Reads), float64(r.Writes)
	}
	const bw = 11
	for i, x := range []struct {
		name string
		vals plotter.Values
	}{{"reads", reads}, {"writes", writes}} {
		b, err := plotter.NewBarChart(x.vals, vg.Points(bw))
		if err != nil {
			return nil, fmt.Errorf("report: access sizes: %w", err)
		}
		b.Color = color8(i)
		b.LineStyle.Width = 0
		b.Offset = vg.Points(float64(2*i-1) * bw / 2)
		p.Add(b)
		p.Legend.Add(x.name, b)
	}
	p.Legend.Top = true
	p.NominalX(names...)
	// Darshan's labels are long for their bars: slanted, they do not run into each other.
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	p.Y.Min = 0
	if p.Y.Max > 0 {
		p.Y.Max *= 1.2 // headroom for the legend
	}
	return p, nil
}

// durLinTicks labels a linear nanosecond axis with durations at round steps.
type durLinTicks struct{}

func (durLinTicks) Ticks(min, max float64) []plot.Tick {
	ts := niceTicks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			v := ts[i].Value
			switch {
			case v == 0:
				ts[i].Label = "0"
			case v < 0:
				ts[i].Label = "−" + trimZeros(format.Dur(int64(-v)))
			default:
				ts[i].Label = "+" + trimZeros(format.Dur(int64(v)))
			}
		}
	}
	return ts
}

// lostBar is one row of a comparison's "time lost per call" chart: the time each side but
// the baseline lost (positive) or gained against it.
type lostBar struct {
	Name  string
	Delta []int64 // per side but the baseline
}

// maxLostBars bounds the rows of the chart.
const maxLostBars = 10

// lostBars are the rows of c's leading view whose total time moved most on any side,
// largest first.
func lostBars(c *Comparison) []lostBar {
	var out []lostBar
	for _, r := range c.rows() {
		b := lostBar{Name: r.Name}
		moved := false
		for i := 1; i < len(r.Sides); i++ {
			d := r.Sides[i].TotalNs - r.Sides[0].TotalNs
			b.Delta = append(b.Delta, d)
			moved = moved || d != 0
		}
		if moved {
			out = append(out, b)
		}
	}
	most := func(b lostBar) int64 {
		var m int64
		for _, d := range b.Delta {
			m = max(m, abs64(d))
		}
		return m
	}
	sort.SliceStable(out, func(i, j int) bool { return most(out[i]) > most(out[j]) })
	return out[:min(len(out), maxLostBars)]
}

// lostPlot draws lostBars as horizontal bars, one colour per side but the baseline.
func lostPlot(c *Comparison, bars []lostBar) (*plot.Plot, error) {
	if len(bars) == 0 {
		return nil, nil
	}
	unit := axisOf(c.View).unit
	p := newPlot(fmt.Sprintf("Time lost per %s against %s", unit, c.Sides[0].Name), "time lost (+) or gained (−), summed over the calls", "")
	if c.View == ViewRequests {
		p.X.Label.Text = "time lost (+) or gained (−), summed over the requests"
	}
	p.X.Tick.Marker = durLinTicks{}
	n := len(c.Sides) - 1
	bw := math.Min(14, 28/float64(n))
	var names []string
	for i := len(bars) - 1; i >= 0; i-- { // the largest at the top
		names = append(names, bars[i].Name)
	}
	for s := range n {
		vals := make(plotter.Values, len(bars))
		for i, b := range bars {
			vals[len(bars)-1-i] = float64(b.Delta[s])
		}
		bc, err := plotter.NewBarChart(vals, vg.Points(bw))
		if err != nil {
			return nil, fmt.Errorf("report: time lost: %w", err)
		}
		bc.Horizontal = true
		bc.Color = color8(s + 1)
		bc.LineStyle.Width = 0
		bc.Offset = vg.Points((float64(n-1)/2 - float64(s)) * bw) // the first side on top, as in the legend
		p.Add(bc)
		if n > 1 {
			p.Legend.Add(c.Sides[s+1].Name, bc)
		}
	}
	p.NominalY(names...)
	zero, err := plotter.NewLine(plotter.XYs{{X: 0, Y: -0.5}, {X: 0, Y: float64(len(bars)) - 0.5}})
	if err != nil {
		return nil, fmt.Errorf("report: time lost: %w", err)
	}
	zero.Color = color.Gray{Y: 90}
	zero.Width = vg.Points(0.8)
	p.Add(zero)
	lo, hi := 0.0, 0.0
	for _, b := range bars {
		for _, d := range b.Delta {
			lo, hi = math.Min(lo, float64(d)), math.Max(hi, float64(d))
		}
	}
	pad := (hi - lo) * 0.05
	p.X.Min, p.X.Max = lo-pad, hi+pad
	if lo == 0 {
		p.X.Min = 0
	}
	// The legend goes above the rows, in the corner the busiest row's bars leave free.
	p.Y.Min = -0.6
	p.Y.Max = float64(len(bars)) - 0.4
	if n > 1 {
		p.Y.Max += 0.45 * float64(n)
	}
	p.Legend.Top = true
	p.Legend.Left = bars[0].Delta[0] > 0
	p.Legend.XOffs = vg.Points(4)
	if !p.Legend.Left {
		p.Legend.XOffs = -vg.Points(4)
	}
	return p, nil
}

// lostPlotHeight is the height of lostPlot's figure for bars of sides sides (the baseline
// included).
func lostPlotHeight(bars, sides int) vg.Length {
	h := vg.Length(bars)*vg.Length(0.25+0.32*float64(sides-1))*vg.Centimeter + 3*vg.Centimeter
	if sides > 2 {
		h += vg.Length(sides-1) * 0.4 * vg.Centimeter // the legend's lines
	}
	return h
}
