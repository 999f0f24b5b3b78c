package soak

import (
	"math"
	"testing"
)

// A series' growth is judged on its second half: the samples from half
// the run on, once start-up, the first imports and the first crash-loop
// back-offs are over. A least-squares line through them gives the slope;
// the series grew if the line rises, over the whole run, by more than
// growthShare of the series' mean, by more than the series' floor (an
// absolute amount below which nothing counts, such as a few goroutines
// or one leftover mount), and by more than sigmas standard errors of the
// slope (what the scatter of the samples alone would make of a flat
// series; the churn's restarts and edits make the scatter).
const (
	growthShare = 0.10
	sigmas      = 3
)

// fit is a least-squares line y = intercept + slope*t through samples.
type fit struct {
	slope, intercept float64
	stderr           float64 // the slope's standard error
	mean             float64
	n                int
}

// leastSquares fits a line through the points (t[i], y[i]).
func leastSquares(t, y []float64) fit {
	n := len(t)
	f := fit{n: n}
	if n == 0 {
		return f
	}
	var st, sy float64
	for i := range t {
		st += t[i]
		sy += y[i]
	}
	mt, my := st/float64(n), sy/float64(n)
	f.mean, f.intercept = my, my
	var stt, sty float64
	for i := range t {
		stt += (t[i] - mt) * (t[i] - mt)
		sty += (t[i] - mt) * (y[i] - my)
	}
	if n < 3 || stt == 0 {
		return f
	}
	f.slope = sty / stt
	f.intercept = my - f.slope*mt
	var sse float64
	for i := range t {
		r := y[i] - f.intercept - f.slope*t[i]
		sse += r * r
	}
	f.stderr = math.Sqrt(sse / float64(n-2) / stt)
	return f
}

// secondHalf fits the points from half of span on.
func secondHalf(t, y []float64, span float64) fit {
	var ht, hy []float64
	for i := range t {
		if t[i] >= span/2 {
			ht, hy = append(ht, t[i]), append(hy, y[i])
		}
	}
	return leastSquares(ht, hy)
}

// growth is how much f's line rises over span, and whether that is
// growth beyond noise for a series whose floor is floor.
func (f fit) growth(span, floor float64) (float64, bool) {
	g := f.slope * span
	return g, f.n >= 3 && g > growthShare*math.Abs(f.mean) && g > floor && f.slope > sigmas*f.stderr
}

func TestGrowth(t *testing.T) {
	const span = 3600.0
	line := func(n int, y func(i int, t float64) float64) (ts, ys []float64) {
		for i := range n {
			tt := span * float64(i) / float64(n-1)
			ts, ys = append(ts, tt), append(ys, y(i, tt))
		}
		return ts, ys
	}
	for _, tc := range []struct {
		name  string
		y     func(i int, t float64) float64
		floor float64
		want  bool
	}{
		{"flat", func(int, float64) float64 { return 100 }, 1, false},
		{"flat with scatter", func(i int, _ float64) float64 { return 100 + float64(i%5) - 2 }, 1, false},
		{"leak", func(_ int, t float64) float64 { return 100 + t/60 }, 1, true},
		{"leak under the floor", func(_ int, t float64) float64 { return 100 + t/60 }, 100, false},
		{"leak under a tenth of the mean", func(_ int, t float64) float64 { return 1000 + t/600 }, 1, false},
		{"shrinking", func(_ int, t float64) float64 { return 200 - t/60 }, 1, false},
		// A sawtooth (a daemon restarted every 7 minutes, warming up each
		// time) rises within each tooth, not over the run.
		{"sawtooth", func(_ int, t float64) float64 { return 50 + math.Mod(t, 420)/30 }, 5, false},
		{"leak on a sawtooth", func(_ int, t float64) float64 { return 50 + math.Mod(t, 420)/30 + t/36 }, 5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, ys := line(361, tc.y)
			f := secondHalf(ts, ys, span)
			g, grew := f.growth(span, tc.floor)
			if grew != tc.want {
				t.Errorf("growth %.2f (slope %.4g ± %.2g, mean %.1f): grew %t, want %t", g, f.slope, f.stderr, f.mean, grew, tc.want)
			}
		})
	}
}

func TestLeastSquares(t *testing.T) {
	f := leastSquares([]float64{0, 1, 2, 3}, []float64{1, 3, 5, 7})
	if math.Abs(f.slope-2) > 1e-9 || math.Abs(f.intercept-1) > 1e-9 || f.stderr > 1e-9 || f.mean != 4 {
		t.Errorf("leastSquares = %+v, want slope 2, intercept 1, stderr 0, mean 4", f)
	}
}
