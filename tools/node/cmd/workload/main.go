// Command workload is the one program of the real node's two local images (taskfsm_dev/node.py):
// the pod sandbox ("pause") image and the workload image the real-node tests' Functions run.
// No registry is reachable where the tests run, so both images are built from this static
// binary and imported into the node's containerd.
//
//	workload pause               hold a pod sandbox: wait for SIGTERM or SIGINT, reap orphans
//	workload cat PATH...         print each file (a Task's helper data), then exit 0
//	workload exit CODE [MESSAGE] print MESSAGE, write it as the termination message, exit CODE
//	workload sleep SECONDS       sleep, then exit 0
//	workload get URL [TOKEN_FILE]
//	                             GET URL over HTTPS (the server's certificate is not verified:
//	                             the tests check authorization, not the certificate), with the
//	                             bearer token read from TOKEN_FILE when given; print the status
//	                             code, exit 0 when the request was answered
package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: workload pause | cat PATH... | exit CODE [MESSAGE] | sleep SECONDS | get URL [TOKEN_FILE]")
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "pause":
		pause()
	case "cat":
		for _, path := range args {
			data, err := os.ReadFile(path)
			if err != nil {
				fail(err.Error())
			}
			os.Stdout.Write(data)
			fmt.Println()
		}
	case "exit":
		if len(args) < 1 {
			fail("exit CODE [MESSAGE]")
		}
		code, err := strconv.Atoi(args[0])
		if err != nil {
			fail(err.Error())
		}
		message := strings.Join(args[1:], " ")
		fmt.Println(message)
		// The kubelet reads the container's termination message from here by default.
		_ = os.WriteFile("/dev/termination-log", []byte(message), 0o644)
		os.Exit(code)
	case "sleep":
		if len(args) != 1 {
			fail("sleep SECONDS")
		}
		seconds, err := strconv.ParseFloat(args[0], 64)
		if err != nil {
			fail(err.Error())
		}
		time.Sleep(time.Duration(seconds * float64(time.Second)))
	case "get":
		if len(args) < 1 {
			fail("get URL [TOKEN_FILE]")
		}
		get(args[0], args[1:])
	default:
		fail("unknown mode " + os.Args[1])
	}
}

func pause() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}

func get(url string, tokenFile []string) {
	request, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		fail(err.Error())
	}
	if len(tokenFile) > 0 {
		token, err := os.ReadFile(tokenFile[0])
		if err != nil {
			fail(err.Error())
		}
		request.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	}
	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
	response, err := client.Do(request)
	if err != nil {
		fail(err.Error())
	}
	defer response.Body.Close()
	_, _ = io.Copy(io.Discard, response.Body)
	fmt.Printf("status %d\n", response.StatusCode)
}

func fail(message string) {
	fmt.Fprintln(os.Stderr, "workload: "+message)
	os.Exit(2)
}
