// SPDX-License-Identifier: Apache-2.0
// regexdiff: Go's regexp, as Prometheus matches a label matcher `label=~"pattern"`
// (anchored, with (?s): labels.NewFastRegexMatcher), for test_regex.py.
//
// stdin: lines "HEXPATTERN HEXVALUE"; stdout: a line per case, "err" when Go's
// regexp refuses the pattern, else "1" or "0" for whether the value matches.
package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<16), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		f := strings.SplitN(in.Text(), " ", 2)
		if len(f) != 2 {
			fmt.Fprintln(os.Stderr, "regexdiff: bad line")
			os.Exit(2)
		}
		p, err1 := hex.DecodeString(f[0])
		v, err2 := hex.DecodeString(f[1])
		if err1 != nil || err2 != nil {
			fmt.Fprintln(os.Stderr, "regexdiff: bad hex")
			os.Exit(2)
		}
		re, err := regexp.Compile("^(?s:" + string(p) + ")$")
		switch {
		case err != nil:
			fmt.Fprintln(out, "err")
		case re.MatchString(string(v)):
			fmt.Fprintln(out, "1")
		default:
			fmt.Fprintln(out, "0")
		}
	}
}
