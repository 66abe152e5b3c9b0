package api_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/client"
	"github.com/kilnhq/kiln/controller/events"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

func eventsServer(t *testing.T) (*httptest.Server, *events.Bus, store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "k.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bus := events.NewBus()
	srv := httptest.NewServer(api.New(api.Config{Store: st, Conductor: "c1", Events: bus}))
	t.Cleanup(func() {
		bus.Close()
		srv.Close()
		st.Close()
	})
	return srv, bus, st
}

func waitSubscribers(t *testing.T, bus *events.Bus, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); bus.Subscribers() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("subscribers = %d, want %d", bus.Subscribers(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// With ?node=, the stream starts with the node's current state, then
// carries only that node's events.
func TestEventsStreamFilterAndSnapshot(t *testing.T) {
	srv, bus, st := eventsServer(t)
	name := "n1"
	n := &proto.Node{UUID: "5b1c8f7e-6a0e-4d33-9b1f-1e2d3c4b5a60", Name: &name, Driver: "fake-hardware", ProvisionState: proto.StateAvailable}
	if err := st.CreateNode(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(srv.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []string
	stop := errors.New("stop")
	go func() {
		waitSubscribers(t, bus, 1)
		other := "other"
		bus.Publish(events.Event{UUID: "00000000-0000-0000-0000-000000000000", Name: &other, ProvisionState: proto.StateCleaning})
		bus.Publish(events.Event{UUID: n.UUID, Name: &name, ProvisionState: proto.StateDeploying})
		bus.Publish(events.Event{UUID: n.UUID, Name: &name, ProvisionState: proto.StateActive})
	}()
	err = c.Events(ctx, []string{"n1"}, func(m client.StreamMessage) error {
		got = append(got, m.Kind+":"+m.Event.UUID[:8]+":"+string(m.Event.ProvisionState))
		if m.Event.ProvisionState == proto.StateActive {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("Events: %v", err)
	}
	want := "[node:5b1c8f7e:available node:5b1c8f7e:deploying node:5b1c8f7e:active]"
	if fmt.Sprint(got) != want {
		t.Errorf("got %v\nwant %s", got, want)
	}
	// An unknown node is Ironic's 404.
	err = c.Events(ctx, []string{"nope"}, func(client.StreamMessage) error { return nil })
	if !client.IsNotFound(err) {
		t.Errorf("unknown node: %v, want a 404", err)
	}
}

// A client that connects and never reads cannot slow the publisher (the
// conductor and the API): its events are dropped, the other subscribers
// receive everything up to the last event, and Publish returns at once.
func TestEventsSlowClientDoesNotSlowPublisher(t *testing.T) {
	srv, bus, _ := eventsServer(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /v1/events HTTP/1.1\r\nHost: kiln\r\n\r\n")
	waitSubscribers(t, bus, 1)

	c, _ := client.New(srv.URL, client.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lastSeen := make(chan error, 1)
	go func() {
		stop := errors.New("stop")
		err := c.Events(ctx, nil, func(m client.StreamMessage) error {
			if m.Kind == "node" && m.Event.UUID == "last" {
				return stop
			}
			return nil
		})
		if errors.Is(err, stop) {
			err = nil
		}
		lastSeen <- err
	}()
	waitSubscribers(t, bus, 2)

	// 20,000 events of ~4 KiB: 80 MiB, far more than socket buffers hold.
	big := string(bytes.Repeat([]byte("x"), 4096))
	published := make(chan struct{})
	go func() {
		for i := range 20000 {
			bus.Publish(events.Event{UUID: fmt.Sprint(i), LastError: &big, ProvisionState: proto.StateDeploying})
		}
		bus.Publish(events.Event{UUID: "last", ProvisionState: proto.StateActive})
		close(published)
	}()
	select {
	case <-published:
	case <-time.After(30 * time.Second):
		t.Fatal("publishing blocked behind a client that does not read")
	}
	if err := <-lastSeen; err != nil {
		t.Fatalf("reading client: %v", err)
	}
}
