package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/restoresync/restoresync/bench"
)

// chartTypes are the --chart file name extensions, each with its drawing.
var chartTypes = map[string]func(io.Writer, *bench.Results) error{
	".svg": bench.WriteChart,
	".png": bench.WriteChartPNG,
}

// chartDrawer returns the drawing for path's extension (any case), or a
// usage error listing the valid ones.
func chartDrawer(path string) (func(io.Writer, *bench.Results) error, error) {
	ext := strings.ToLower(filepath.Ext(path))
	if draw := chartTypes[ext]; draw != nil {
		return draw, nil
	}
	return nil, &usageError{fmt.Sprintf("--chart %s: unknown chart type %q (valid: .svg, .png)", path, filepath.Ext(path))}
}

// checkOutputs checks, before anything is run or read, that the --out file
// (when not "") and the --chart files can be written: a chart's name must
// end in .svg or .png (a usage error otherwise), an existing file must open
// for writing (it is not truncated here) and must not be a directory, and a
// new file's directory must exist and take a new file (a temporary one is
// created there and removed). The errors name the flag and the path; they
// exit with status 11 (file I/O), or 1 for a bad chart name.
func checkOutputs(out string, charts []string) error {
	for _, c := range charts {
		if _, err := chartDrawer(c); err != nil {
			return err
		}
	}
	if out != "" {
		if err := checkWritable("--out", out); err != nil {
			return err
		}
	}
	for _, c := range charts {
		if err := checkWritable("--chart", c); err != nil {
			return err
		}
	}
	return nil
}

// checkWritable is checkOutputs' test of one path.
func checkWritable(flag, path string) error {
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return fmt.Errorf("%s %s: is a directory", flag, path)
	case err == nil:
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("%s %s: cannot write it: %w", flag, path, unwrapPath(err))
		}
		return f.Close()
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s: %w", flag, path, unwrapPath(err))
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".restoresync-bench-check-*")
	if err != nil {
		return fmt.Errorf("%s %s: cannot create a file in %s: %w", flag, path, dir, unwrapPath(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// unwrapPath drops an *fs.PathError's operation and path, which the
// caller's message already gives.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// writeFile creates path and writes it with write.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeResults writes res in format to out, or to stdout when out is "".
// When out cannot be written after all (checkOutputs passed, but the disk
// filled up or the directory went away), the results go to stdout so that
// nothing measured is lost, and the error says so.
func writeResults(stdout io.Writer, out string, res *bench.Results, format string) error {
	write := func(w io.Writer) error { return bench.WriteResults(w, res, format) }
	if out == "" {
		return write(stdout)
	}
	err := writeFile(out, write)
	if err == nil {
		return nil
	}
	if werr := write(stdout); werr != nil {
		return fmt.Errorf("--out %s: %w (and on stdout: %w)", out, err, werr)
	}
	return fmt.Errorf("--out %s: %w (the results went to stdout instead)", out, err)
}

// writeChartFile draws res into path, an SVG or PNG by its extension
// (checked by checkOutputs).
func writeChartFile(path string, res *bench.Results) error {
	draw, err := chartDrawer(path)
	if err != nil {
		return err
	}
	if err := writeFile(path, func(w io.Writer) error { return draw(w, res) }); err != nil {
		return fmt.Errorf("--chart %s: %w", path, err)
	}
	return nil
}
