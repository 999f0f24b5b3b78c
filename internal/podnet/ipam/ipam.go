// Package ipam hands out pod addresses from the pod CIDRs and keeps each
// allocation as a file under a directory, so allocations survive a restart
// of staticlet and a restarted staticlet can tell which sandbox holds which
// address. It does no networking: the caller puts the addresses on links.
//
// A Pool is safe for concurrent use; two Pools on the same directory (two
// staticlets, which is a misconfiguration) never hand out the same
// address, as each allocation is an exclusive file creation.
package ipam

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// maxScan bounds the addresses tried for one allocation, so a huge IPv6
// range that is somehow full fails rather than spins.
const maxScan = 1 << 16

// Pool allocates addresses from one range per address family.
type Pool struct {
	dir      string
	prefixes []netip.Prefix
	// mu serialises allocations, so the round-robin cursor moves once per
	// address handed out.
	mu sync.Mutex
}

// New returns a pool over prefixes (at most one IPv4 and one IPv6 range,
// each with room for a gateway and at least one pod) keeping its files
// under dir. It creates nothing until the first allocation.
func New(dir string, prefixes []netip.Prefix) (*Pool, error) {
	seen := map[bool]bool{}
	out := make([]netip.Prefix, 0, len(prefixes))
	for _, p := range prefixes {
		p = p.Masked()
		if !p.IsValid() {
			return nil, fmt.Errorf("pod CIDR %s is not valid", p)
		}
		if p.Addr().Is4In6() {
			return nil, fmt.Errorf("pod CIDR %s: an IPv4-mapped range is not supported", p)
		}
		if seen[p.Addr().Is4()] {
			return nil, fmt.Errorf("pod CIDR %s: only one range per address family is supported", p)
		}
		seen[p.Addr().Is4()] = true
		if p.Addr().BitLen()-p.Bits() < 2 {
			return nil, fmt.Errorf("pod CIDR %s is too small: it needs room for a gateway and pods", p)
		}
		out = append(out, p)
	}
	return &Pool{dir: dir, prefixes: out}, nil
}

// Prefixes are the pool's ranges, IPv4 first when given first.
func (p *Pool) Prefixes() []netip.Prefix { return p.prefixes }

// Gateway is the address of range prefix that the bridge holds: the first
// after the network's own.
func Gateway(prefix netip.Prefix) netip.Prefix {
	return netip.PrefixFrom(prefix.Masked().Addr().Next(), prefix.Bits())
}

// Gateways are the bridge's addresses, one per range.
func (p *Pool) Gateways() []netip.Prefix {
	out := make([]netip.Prefix, len(p.prefixes))
	for i, pr := range p.prefixes {
		out[i] = Gateway(pr)
	}
	return out
}

// Allocate reserves one address in each range for owner (a sandbox ID) and
// returns them with their ranges' lengths. On failure nothing is reserved.
func (p *Pool) Allocate(owner string) (_ []netip.Prefix, err error) {
	if owner == "" || strings.ContainsAny(owner, "/\n") {
		return nil, fmt.Errorf("allocating an address: bad owner %q", owner)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var got []netip.Prefix
	defer func() {
		if err != nil {
			for _, a := range got {
				_ = os.Remove(p.file(a))
			}
		}
	}()
	for _, pr := range p.prefixes {
		a, err := p.allocateIn(pr, owner)
		if err != nil {
			return nil, err
		}
		got = append(got, a)
	}
	return got, nil
}

// allocateIn reserves the next free address of pr after the last one
// reserved, so a released address is reused as late as possible (stale ARP
// and conntrack entries of the old pod age out first), as CNI's host-local
// does.
func (p *Pool) allocateIn(pr netip.Prefix, owner string) (netip.Prefix, error) {
	dir := p.rangeDir(pr)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return netip.Prefix{}, fmt.Errorf("creating the allocation directory of %s: %w", pr, err)
	}
	first, last := usable(pr)
	a := first
	if b, err := os.ReadFile(filepath.Join(dir, "last")); err == nil {
		if prev, err := netip.ParseAddr(strings.TrimSpace(string(b))); err == nil && pr.Contains(prev) && prev.Compare(last) < 0 && prev.Compare(first) >= 0 {
			a = prev.Next()
		}
	}
	for range min(size(pr), maxScan) {
		f, err := os.OpenFile(filepath.Join(dir, a.String()), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			_, werr := f.WriteString(owner)
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				_ = os.Remove(f.Name())
				return netip.Prefix{}, fmt.Errorf("recording address %s: %w", a, werr)
			}
			// Best effort: a lost cursor only makes reuse come sooner.
			_ = os.WriteFile(filepath.Join(dir, "last"), []byte(a.String()), 0o600)
			return netip.PrefixFrom(a, pr.Bits()), nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return netip.Prefix{}, fmt.Errorf("recording address %s: %w", a, err)
		}
		if a == last {
			a = first
		} else {
			a = a.Next()
		}
	}
	return netip.Prefix{}, fmt.Errorf("no free address in pod CIDR %s", pr)
}

// usable returns the first and last addresses a pod may get in pr: not the
// network's own, nor the gateway, nor IPv4's broadcast.
func usable(pr netip.Prefix) (first, last netip.Addr) {
	first = pr.Addr().Next().Next()
	b := pr.Addr().AsSlice()
	host := pr.Addr().BitLen() - pr.Bits()
	for i := len(b) - 1; host > 0; i-- {
		n := min(host, 8)
		b[i] |= byte(1<<n - 1)
		host -= n
	}
	last, _ = netip.AddrFromSlice(b)
	if pr.Addr().Is4() {
		last = last.Prev()
	}
	if last.Less(first) {
		last = first
	}
	return first, last
}

// size is the number of addresses of pr, capped so it fits.
func size(pr netip.Prefix) uint64 {
	host := pr.Addr().BitLen() - pr.Bits()
	if host >= 63 {
		return 1 << 63
	}
	return 1 << host
}

// Release frees every address owner holds, in any range on disk (ranges
// from an earlier configuration included). Releasing nothing succeeds.
func (p *Pool) Release(owner string) error {
	all, err := p.Owners()
	if err != nil {
		return err
	}
	var errs []error
	for _, a := range all[owner] {
		if err := os.Remove(p.file(netip.PrefixFrom(a.Addr, a.Bits))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("releasing address %s: %w", a.Addr, err))
		}
	}
	return errors.Join(errs...)
}

// Held is one reserved address and the length of its range.
type Held struct {
	Addr netip.Addr
	Bits int
}

// Owners maps each owner to the addresses it holds, in every range on
// disk.
func (p *Pool) Owners() (map[string][]Held, error) {
	ranges, err := os.ReadDir(p.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing address allocations: %w", err)
	}
	out := map[string][]Held{}
	for _, r := range ranges {
		pr, err := netip.ParsePrefix(strings.Replace(r.Name(), "_", "/", 1))
		if err != nil || !r.IsDir() {
			continue
		}
		entries, err := os.ReadDir(filepath.Join(p.dir, r.Name()))
		if err != nil {
			return nil, fmt.Errorf("listing address allocations of %s: %w", pr, err)
		}
		for _, e := range entries {
			a, err := netip.ParseAddr(e.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile(filepath.Join(p.dir, r.Name(), e.Name()))
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return nil, fmt.Errorf("reading the allocation of %s: %w", a, err)
			}
			owner := strings.TrimSpace(string(b))
			out[owner] = append(out[owner], Held{Addr: a, Bits: pr.Bits()})
		}
	}
	return out, nil
}

// rangeDir holds the allocations of pr, one file per address.
func (p *Pool) rangeDir(pr netip.Prefix) string {
	return filepath.Join(p.dir, strings.Replace(pr.Masked().String(), "/", "_", 1))
}

// file is where address a of its range is recorded.
func (p *Pool) file(a netip.Prefix) string {
	return filepath.Join(p.rangeDir(a), a.Addr().String())
}
