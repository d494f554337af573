// await-ready: the entry point of a hosted control-plane component. It waits until the server the component
// needs answers, then runs the component in its place, so a virtual cluster's pods can all be created together
// without one exiting (and restarting) while the one it depends on starts.
//
//	await-ready WAIT-FLAGS [-- COMMAND ARGS...]
//	    with a COMMAND, await-ready becomes it (exec, same process) once ready; without, it returns 0.
//	    Becoming the component, rather than being an init container before it, saves the kubelet's noticing
//	    that an init container ended and then creating the component's container: up to a second or so.
//
//	await-ready --kubeconfig FILE [--timeout 10m]
//	    the controller-manager and scheduler: the API server in their own kubeconfig answers /readyz. The server
//	    and its CA come from FILE (the first cluster's `server` and `certificate-authority-data`, as the
//	    collection writes them); /readyz needs no credentials.
//	await-ready --url URL --cacert FILE [--cert FILE --key FILE] [--timeout 10m]
//	    the API server: its etcd answers URL (its /health) with 200, which etcd does once the cluster has a
//	    leader; the client certificate is the one the API server itself uses for etcd.
//	await-ready --local URL [--timeout 9s]
//	    the startup probe of a component, run in its own container: URL (its /readyz or /healthz on a loopback
//	    address) answers 200. Nothing stands between the probe and the server, so its certificate is not checked;
//	    polling every 50 ms, the pod turns Ready within a moment of the server, where the kubelet's own probe
//	    would look only once a second. The polls share one connection: a TLS handshake every 50 ms for each
//	    component still starting saturated 2 cores when 25 virtual clusters started at once (make bench-tenants).
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
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the component's kubeconfig")
	url := flag.String("url", "", "an https URL to wait for instead of the kubeconfig's /readyz")
	local := flag.String("local", "", "an https URL on a loopback address, its certificate unchecked")
	caFile := flag.String("cacert", "", "with --url: the CA of its server")
	certFile := flag.String("cert", "", "with --url: a client certificate")
	keyFile := flag.String("key", "", "with --url: the client certificate's key")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	flag.Parse()
	var waitFor target
	var err error
	if *local != "" {
		if *kubeconfig != "" || *url != "" || *caFile != "" || *certFile != "" || *keyFile != "" {
			err = errors.New("--local stands alone: no --kubeconfig, --url, --cacert, --cert or --key")
		} else {
			waitFor, err = localTarget(*local)
		}
	} else {
		waitFor, err = targetOf(*kubeconfig, *url, *caFile, *certFile, *keyFile)
	}
	command := flag.Args()
	var path string
	if err == nil && len(command) > 0 {
		// Checked before the wait: a component that is not there should fail now, not once its server answers.
		path, err = exec.LookPath(command[0])
	}
	if err == nil {
		err = run(waitFor, *timeout)
	}
	if err == nil && len(command) > 0 {
		err = syscall.Exec(path, command, os.Environ())
	}
	if err != nil {
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

// target is what to wait for: a URL and the TLS settings to reach it with.
type target struct {
	url  string
	tls  *tls.Config
	poll time.Duration // between attempts; 100 ms when unset
	// reuse keeps the connection from one attempt to the next. Only for a loopback server: a Service's address
	// is dialled anew at every attempt (below).
	reuse bool
}

func targetOf(kubeconfig, url, caFile, certFile, keyFile string) (target, error) {
	switch {
	case (kubeconfig == "") == (url == ""):
		return target{}, errors.New("give either --kubeconfig or --url")
	case kubeconfig != "":
		if caFile != "" || certFile != "" || keyFile != "" {
			return target{}, errors.New("--cacert, --cert and --key go with --url; a kubeconfig names its CA")
		}
		server, caPEM, err := cluster(kubeconfig)
		if err != nil {
			return target{}, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return target{}, fmt.Errorf("%s: no CA certificate in certificate-authority-data", kubeconfig)
		}
		config := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		return target{url: strings.TrimSuffix(server, "/") + "/readyz", tls: config}, nil
	}
	if !strings.HasPrefix(url, "https://") || caFile == "" {
		return target{}, errors.New("--url takes an https URL and --cacert its CA")
	}
	if (certFile == "") != (keyFile == "") {
		return target{}, errors.New("--cert and --key go together")
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return target{}, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return target{}, fmt.Errorf("%s: no CA certificate", caFile)
	}
	config := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return target{}, err
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return target{url: url, tls: config}, nil
}

// localTarget checks that URL is an https URL on a loopback address: the only place where skipping the
// certificate check costs nothing.
func localTarget(raw string) (target, error) {
	parsed, err := neturl.Parse(raw)
	if err != nil || parsed.Scheme != "https" {
		return target{}, fmt.Errorf("--local takes an https URL, not %q", raw)
	}
	ip := net.ParseIP(parsed.Hostname())
	if ip == nil || !ip.IsLoopback() {
		return target{}, fmt.Errorf("--local takes a loopback address (127.0.0.1 or ::1), not %q", parsed.Hostname())
	}
	config := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // loopback only
	return target{url: raw, tls: config, poll: 50 * time.Millisecond, reuse: true}, nil
}

func run(t target, timeout time.Duration) error {
	// A connection to a Service whose endpoint has just appeared can lose its first SYN while the node's rules
	// catch up; the kernel would send it again only after a second. Dial anew instead, at the next attempt.
	dialer := &net.Dialer{Timeout: 250 * time.Millisecond}
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: t.tls, DialContext: dialer.DialContext, DisableKeepAlives: !t.reuse},
	}
	url := t.url
	pause := t.poll
	if pause == 0 {
		pause = 100 * time.Millisecond
	}
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
		case <-time.After(pause):
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
	// Read to its end (a /readyz answer is short), so that a kept connection serves the next attempt.
	_, err = io.Copy(io.Discard, io.LimitReader(response.Body, 1<<16))
	response.Body.Close()
	return response.StatusCode, err
}

func describe(status int, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("HTTP %d", status)
}
