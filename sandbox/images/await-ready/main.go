// await-ready: the init container of a hosted controller-manager and scheduler. It returns once the API server
// in the component's own kubeconfig answers /readyz, so the three components can be created together without
// the controllers exiting (and restarting) while their API server starts.
//
//	await-ready --kubeconfig FILE [--timeout 10m]
//
// The server and its CA come from FILE (the first cluster's `server` and `certificate-authority-data`, as the
// collection writes them); /readyz needs no credentials.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the component's kubeconfig")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	flag.Parse()
	if err := run(*kubeconfig, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "await-ready:", err)
		os.Exit(1)
	}
}

// cluster reads the first `server` and `certificate-authority-data` of a kubeconfig in block-style YAML or JSON.
func cluster(path string) (string, []byte, error) {
	file, err := os.Open(path)
	if err != nil {
		return "", nil, err
	}
	defer file.Close()
	var server, ca string
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 64*1024), 1024*1024)
	for scanner.Scan() {
		// YAML (`key: value`) or JSON (`"key": "value",`), both of which the collection may write.
		key, value, found := strings.Cut(strings.TrimLeft(scanner.Text(), " -"), ":")
		key = strings.Trim(key, `"`)
		value = strings.Trim(strings.TrimSuffix(strings.TrimSpace(value), ","), `"'`)
		switch {
		case !found:
		case key == "server" && server == "":
			server = value
		case key == "certificate-authority-data" && ca == "":
			ca = value
		}
	}
	if err := scanner.Err(); err != nil {
		return "", nil, err
	}
	if !strings.HasPrefix(server, "https://") || ca == "" {
		return "", nil, fmt.Errorf("%s names no https server with certificate-authority-data", path)
	}
	pem, err := base64.StdEncoding.DecodeString(ca)
	if err != nil {
		return "", nil, fmt.Errorf("%s: certificate-authority-data: %w", path, err)
	}
	return server, pem, nil
}

func run(kubeconfig string, timeout time.Duration) error {
	if kubeconfig == "" {
		return errors.New("--kubeconfig is required")
	}
	server, caPEM, err := cluster(kubeconfig)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("%s: no CA certificate in certificate-authority-data", kubeconfig)
	}
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	url := strings.TrimSuffix(server, "/") + "/readyz"
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	started, lastSaid := time.Now(), time.Now()
	lastStatus, lastErr := 0, error(nil)
	for {
		status, err := readyz(ctx, client, url)
		if err == nil && status == http.StatusOK {
			fmt.Printf("await-ready: %s is ready after %.1fs\n", url, time.Since(started).Seconds())
			return nil
		}
		// An attempt the overall deadline cut short says nothing about the server: report the one before it.
		if ctx.Err() == nil || (lastStatus == 0 && lastErr == nil) {
			lastStatus, lastErr = status, err
		}
		if time.Since(lastSaid) >= 10*time.Second {
			fmt.Printf("await-ready: waiting for %s (%s)\n", url, describe(lastStatus, lastErr))
			lastSaid = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s (%s)", url, timeout, describe(lastStatus, lastErr))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func readyz(ctx context.Context, client *http.Client, url string) (int, error) {
	request, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	response, err := client.Do(request)
	if err != nil {
		return 0, err
	}
	response.Body.Close()
	return response.StatusCode, nil
}

func describe(status int, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("HTTP %d", status)
}
