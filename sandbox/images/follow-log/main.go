// follow-log: the container that streams a tenant API server's audit log to its own standard output, where the
// host's log collection and `kubectl logs -c audit-log` find it per tenant. The API server writes the log to a
// file of a volume shared by the two containers and rotates it by size (renaming it and starting a new one).
//
//	follow-log FILE
//
// It writes each whole line of FILE, from its beginning, then follows it: a renamed file is read to its end
// before the new one is opened (and any file rotated in between), a truncated one is read again from its start, a
// missing one is waited for. A
// line still being written is held back until its newline arrives. It never exits on its own (an ended
// container would turn the API server's pod unready); SIGTERM ends it once what was read is written. A restart
// of this container starts again at the beginning of the current file, so its lines may come twice.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// How often the end of the file is looked at again: a line reaches the log within this of being written.
const poll = 200 * time.Millisecond

// follower holds the open file, how far it was read, and a line whose newline has not come yet.
type follower struct {
	path    string
	file    *os.File
	offset  int64
	partial []byte
	out     *bufio.Writer
	last    os.FileInfo // the file read before the one to open next, when that one was rotated away
}

// open a file to read from its beginning: the one at the path, or a rotated one.
func (f *follower) open(path string) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	f.file, f.offset, f.partial = file, 0, nil
	return nil
}

// drain writes every whole line from the file's read position to its end.
func (f *follower) drain() error {
	buf := make([]byte, 64*1024)
	for {
		n, err := f.file.Read(buf)
		if n > 0 {
			f.offset += int64(n)
			data := append(f.partial, buf[:n]...)
			end := bytes.LastIndexByte(data, '\n')
			if end >= 0 {
				if _, werr := f.out.Write(data[:end+1]); werr != nil {
					return werr
				}
				data = data[end+1:]
			}
			f.partial = append([]byte(nil), data...)
		}
		if errors.Is(err, io.EOF) {
			return f.out.Flush()
		}
		if err != nil {
			return err
		}
	}
}

// step reads what is new, then notices a rotation (the path names another file, or none) or a truncation.
func (f *follower) step() error {
	if f.file == nil {
		if err := f.next(); err != nil {
			return err
		}
		if f.file == nil {
			return nil
		}
	}
	if err := f.drain(); err != nil {
		return err
	}
	current, err := os.Stat(f.path)
	held, herr := f.file.Stat()
	if herr != nil {
		return herr
	}
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	case err != nil || !os.SameFile(current, held):
		// Renamed away: its writer has moved on to a new file, after perhaps writing more to this one since it
		// was read above, so it is read to its end once more; the next look goes on from it.
		if err := f.drain(); err != nil {
			return err
		}
		f.endLine()
		f.file.Close()
		f.file, f.last = nil, held
		return f.next()
	case held.Size() < f.offset:
		// Truncated in place: start over from its beginning.
		if _, err := f.file.Seek(0, io.SeekStart); err != nil {
			return err
		}
		f.offset, f.partial = 0, nil
	}
	return nil
}

// next opens the file to follow after the last one read: first, whole, every file rotated after that one (a
// writer that rotated several times since the last look), then the one at the path, unless that too was rotated
// meanwhile. Without a last one (the start), the one at the path. Leaves f.file nil while there is none.
func (f *follower) next() error {
	for {
		if f.last != nil {
			for _, missed := range f.rotatedAfter(f.last) {
				if err := f.open(missed); err != nil {
					return err
				}
				if err := f.drain(); err != nil {
					return err
				}
				f.endLine()
				info, err := f.file.Stat()
				f.file.Close()
				f.file = nil
				if err != nil {
					return err
				}
				f.last = info
			}
		}
		if err := f.open(f.path); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if f.last == nil || len(f.rotatedAfter(f.last)) == 0 {
			f.last = nil
			return nil
		}
		// Rotated again between the two looks: what came before the opened file is read first.
		f.file.Close()
		f.file = nil
	}
}

// endLine ends a line the writer left without its newline (it never will add it now).
func (f *follower) endLine() {
	if len(f.partial) > 0 {
		f.out.Write(append(f.partial, '\n'))
		f.out.Flush()
		f.partial = nil
	}
}

// rotatedAfter lists the rotated files that came after `held` (itself rotated): the API server's log library names
// them <name>-<time>.<ext> beside the file, the time sorting as the names do. None when `held` is not among them
// (already removed: nothing tells which came after it).
func (f *follower) rotatedAfter(held os.FileInfo) []string {
	ext := filepath.Ext(f.path)
	stem := strings.TrimSuffix(f.path, ext)
	names, err := filepath.Glob(stem + "-*" + ext)
	if err != nil {
		return nil
	}
	sort.Strings(names)
	for i, name := range names {
		if info, err := os.Stat(name); err == nil && os.SameFile(info, held) {
			return names[i+1:]
		}
	}
	return nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: follow-log FILE")
		os.Exit(2)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	f := &follower{path: os.Args[1], out: bufio.NewWriterSize(os.Stdout, 64*1024)}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		if err := f.step(); err != nil {
			// Reported and tried again: the API server's pod must not turn unready for want of its log reader.
			fmt.Fprintf(os.Stderr, "follow-log: %v\n", err)
			if f.file != nil {
				f.file.Close()
				f.file = nil
			}
		}
		select {
		case <-stop:
			if f.file != nil {
				f.drain()
			}
			return
		case <-tick.C:
		}
	}
}
