// Package mounts reads the mount points of this process's mount namespace, for the local
// kubelet (unmounting a Pod's volumes) and the stack (checking nothing is left mounted).
package mounts

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// Points lists the mount points of this mount namespace, in /proc/self/mountinfo order. On a
// read error it returns the points read so far with the error.
func Points() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 5 {
			out = append(out, unescape(fields[4]))
		}
	}
	return out, sc.Err()
}

// Under reports whether the mount point p is dir or below it.
func Under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// unescape undoes the octal escapes (\040 for a space) of /proc/self/mountinfo.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
