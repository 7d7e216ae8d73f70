package framework

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// MetricsText reads a metrics endpoint in Prometheus's text format.
func MetricsText(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// Sum adds up the samples of a metric whose labels contain every selector.
func Sum(text, metric string, selectors ...string) float64 {
	total := 0.0
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		ok := true
		for _, s := range selectors {
			ok = ok && strings.Contains(line, s)
		}
		if i := strings.LastIndexByte(line, ' '); ok && i > 0 {
			if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
				total += v
			}
		}
	}
	return total
}
