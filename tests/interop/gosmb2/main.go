// Command gosmb2 drives an SMB server with github.com/hirochachacha/go-smb2
// (v1.1.0): one session, many goroutines doing concurrent writes and reads of
// files of various sizes (single- and multi-credit requests), every byte
// checked. It prints a summary and exits non-zero on any error.
//
// go-smb2 counts its credits loosely: NEGOTIATE, SESSION_SETUP, TREE_CONNECT
// and CLOSE spend a MessageId without taking a credit from its balance, and an
// error response (END_OF_FILE) is credited twice, so it believes it holds a
// few credits more than the server granted and, once enough requests are in
// flight, sends MessageIds just past its window. A server that grants as Samba
// does (a multi-credit request gets charge - 1 credits more than it asked for)
// keeps it working: the cushion outgrows the client's miscount.
//
// Before the concurrent phase one file of 1 MiB is written and read back alone
// (-warmup): right after session setup the client believes it holds 128
// credits where the server granted 126, and only multi-credit responses widen
// that margin, so a cold burst of concurrent large I/O may exceed the window
// on any server that grants by the request (Samba included) depending only on
// how fast the first responses come back.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	smb2 "github.com/hirochachacha/go-smb2"
)

// sizes cycles through single-credit, just-over-one-credit and large payloads.
var sizes = []int{
	1, 4096, 65536, 65537, 131072 + 3, 300000, 1 << 20, 2<<20 + 7,
}

func content(worker, file, size int) []byte {
	b := make([]byte, size)
	r := rand.New(rand.NewSource(int64(worker)<<32 | int64(file)))
	r.Read(b)
	return b
}

func main() {
	addr := flag.String("addr", "127.0.0.1:445", "server host:port")
	user := flag.String("user", "", "user name")
	password := flag.String("password", "", "password")
	share := flag.String("share", "share", "share name")
	workers := flag.Int("workers", 32, "concurrent goroutines")
	files := flag.Int("files", 16, "files per goroutine")
	timeout := flag.Duration("timeout", 300*time.Second, "bound on the whole run")
	warmup := flag.Bool("warmup", true, "write and read one 1 MiB file alone before the concurrent phase")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	if err := run(ctx, *addr, *user, *password, *share, *workers, *files, *warmup); err != nil {
		fmt.Fprintf(os.Stderr, "gosmb2: FAIL: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, addr, user, password, shareName string, workers, files int, warmup bool) error {
	tcp, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("dial %s: %w", addr, err)
	}
	defer tcp.Close()

	d := &smb2.Dialer{Initiator: &smb2.NTLMInitiator{User: user, Password: password}}
	sess, err := d.DialContext(ctx, tcp)
	if err != nil {
		return fmt.Errorf("session setup: %w", err)
	}
	sess = sess.WithContext(ctx)
	fs, err := sess.Mount(fmt.Sprintf(`\\%s\%s`, host(addr), shareName))
	if err != nil {
		return fmt.Errorf("mount %s: %w", shareName, err)
	}

	dir := fmt.Sprintf("gosmb2-%d", os.Getpid())
	if err := fs.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}

	if warmup {
		name := dir + `\warmup.bin`
		want := content(-1, 0, 1<<20)
		if err := fs.WriteFile(name, want, 0o644); err != nil {
			return fmt.Errorf("warm-up write: %w", err)
		}
		got, err := fs.ReadFile(name)
		if err != nil || !bytes.Equal(got, want) {
			return fmt.Errorf("warm-up read: %d bytes, err %v", len(got), err)
		}
		if err := fs.Remove(name); err != nil {
			return fmt.Errorf("warm-up remove: %w", err)
		}
	}

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		errs     []error
		written  atomic.Int64
		readBack atomic.Int64
		ops      atomic.Int64
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < files; i++ {
				size := sizes[(w+i)%len(sizes)]
				want := content(w, i, size)
				name := fmt.Sprintf(`%s\w%02d-f%02d.bin`, dir, w, i)
				// Whole-file write and read: one CREATE, WRITEs of up to the
				// server's max write size (multi-credit), CLOSE.
				if err := fs.WriteFile(name, want, 0o644); err != nil {
					fail(fmt.Errorf("worker %d: write %s (%d bytes): %w", w, name, size, err))
					return
				}
				written.Add(int64(size))
				got, err := fs.ReadFile(name)
				if err != nil {
					fail(fmt.Errorf("worker %d: read %s: %w", w, name, err))
					return
				}
				readBack.Add(int64(len(got)))
				if !bytes.Equal(got, want) {
					fail(fmt.Errorf("worker %d: %s: read %d bytes, they differ from the %d written", w, name, len(got), size))
					return
				}
				// A ranged read through an open handle: READ at an offset.
				if size > 70000 {
					f, err := fs.Open(name)
					if err != nil {
						fail(fmt.Errorf("worker %d: open %s: %w", w, name, err))
						return
					}
					part := make([]byte, size-65000)
					n, err := f.ReadAt(part, 65000)
					f.Close()
					if err != nil || n != len(part) || !bytes.Equal(part, want[65000:]) {
						fail(fmt.Errorf("worker %d: ranged read of %s: n=%d err=%v", w, name, n, err))
						return
					}
					readBack.Add(int64(n))
				}
				ops.Add(1)
			}
		}(w)
	}
	wg.Wait()

	// The session must still work after the load: list and clean up.
	entries, err := fs.ReadDir(dir)
	if err != nil {
		errs = append(errs, fmt.Errorf("readdir %s after the load: %w", dir, err))
	} else if len(errs) == 0 && len(entries) != workers*files {
		errs = append(errs, fmt.Errorf("readdir %s: %d entries, want %d", dir, len(entries), workers*files))
	}
	if err == nil {
		for _, e := range entries {
			if rerr := fs.Remove(dir + `\` + e.Name()); rerr != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", e.Name(), rerr))
				break
			}
		}
		if rerr := fs.Remove(dir); rerr != nil {
			errs = append(errs, fmt.Errorf("rmdir %s: %w", dir, rerr))
		}
	}
	_ = fs.Umount()
	_ = sess.Logoff()

	fmt.Printf("gosmb2: %d workers, %d files verified of %d, %d bytes written, %d bytes read back, %d errors\n",
		workers, ops.Load(), workers*files, written.Load(), readBack.Load(), len(errs))
	if len(errs) > 0 {
		for i, e := range errs {
			if i == 10 {
				fmt.Fprintf(os.Stderr, "... and %d more\n", len(errs)-i)
				break
			}
			fmt.Fprintln(os.Stderr, e)
		}
		return fmt.Errorf("%d errors", len(errs))
	}
	return nil
}

func host(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}
