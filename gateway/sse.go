package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"time"
)

// The HTTP+SSE transport of protocol version 2024-11-05, which servers
// written before streamable HTTP still speak: the client opens an event
// stream (GET URL); the server's first event, "endpoint", names the address
// the client POSTs its messages to; every message from the server, answers
// included, arrives on the stream as a "message" event. The session lives
// as long as the stream: when it ends, the connection ends, as a child's
// exit does.
//
// The POST address MUST stay on the stream's origin (scheme, host and
// port): the requests carry the server's credentials. Events are bounded
// by the message limit, as streamable HTTP's are.

// sseEndpointWait bounds the wait for the endpoint event.
const sseEndpointWait = 30 * time.Second

// sseState is what the HTTP+SSE transport adds to a remote connection.
// Its fields are guarded by the connection's mu.
type sseState struct {
	endpoint string // where to POST; "" until the endpoint event
	open     bool   // a stream is open (or being opened)
}

// dispatchSSE posts the relay's messages, in order of arrival, to the
// endpoint the stream named, opening the stream first where none is open.
// A stream that cannot be opened (the server is down, or wants a sign-in)
// answers each request in band, and is tried again with the next message.
func (c *remoteConn) dispatchSSE() {
	for {
		frame, msgs, ok := c.next()
		if !ok {
			return
		}
		endpoint, err := c.sseEndpoint()
		if err != nil {
			if c.ctx.Err() == nil {
				c.answerFailed(msgs, err)
			}
			continue
		}
		c.postSSE(endpoint, frame, msgs)
	}
}

// sseEndpoint returns the POST address, opening the event stream and
// waiting (bounded) for its endpoint event when there is none yet.
func (c *remoteConn) sseEndpoint() (string, error) {
	c.mu.Lock()
	endpoint, open := c.sse.endpoint, c.sse.open
	c.mu.Unlock()
	if endpoint != "" {
		return endpoint, nil
	}
	if open {
		return "", fmt.Errorf("%s's event stream named no endpoint", c.host)
	}
	resp, err := c.send(c.listenCtx, http.MethodGet, nil, func(h http.Header) {
		h.Set("Accept", "text/event-stream")
	})
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return "", c.statusError(resp)
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "text/event-stream" {
		resp.Body.Close()
		return "", fmt.Errorf("%s answered with content type %q, not an event stream (is it a streamable HTTP server?)", c.host, ct)
	}
	found := make(chan string, 1)
	c.mu.Lock()
	c.sse.open = true
	c.mu.Unlock()
	go c.readSSE(resp.Body, found)
	select {
	case endpoint := <-found:
		if endpoint == "" {
			return "", fmt.Errorf("%s ended its event stream before naming an endpoint", c.host)
		}
		return endpoint, nil
	case <-time.After(sseEndpointWait):
		c.fail(fmt.Errorf("%s named no endpoint in %s", c.host, sseEndpointWait))
		return "", fmt.Errorf("%s named no endpoint in %s", c.host, sseEndpointWait)
	case <-c.ctx.Done():
		return "", errors.New("the connection is closing")
	}
}

// readSSE reads the event stream until it ends: the endpoint event's
// address goes to found (once; "" when the stream ends without one), each
// message event to the relay. When the stream ends, so does the session.
func (c *remoteConn) readSSE(body io.ReadCloser, found chan<- string) {
	defer body.Close()
	sent := false
	err := c.readSSEEvents(body, func(event string, data []byte) error {
		switch event {
		case "endpoint":
			if sent {
				return nil // the session keeps its first
			}
			endpoint, err := c.sseResolve(string(data))
			if err != nil {
				return err
			}
			c.mu.Lock()
			c.sse.endpoint = endpoint
			c.mu.Unlock()
			found <- endpoint
			sent = true
		case "", "message":
			return c.emit(data, map[string]bool{}, false)
		}
		return nil
	})
	if !sent {
		found <- ""
	}
	if c.listenCtx.Err() != nil {
		return // stopping
	}
	if err == nil {
		err = fmt.Errorf("%s closed the event stream, which ends the session", c.host)
	}
	c.log.Warn("the remote server's event stream ended", slog.Any("err", err))
	c.fail(err)
}

// sseResolve resolves the endpoint event's address against the stream's
// URL; one on another origin is refused.
func (c *remoteConn) sseResolve(ref string) (string, error) {
	base, err := url.Parse(c.url)
	if err != nil {
		return "", err
	}
	r, err := url.Parse(ref)
	if err != nil {
		return "", fmt.Errorf("%s named an endpoint that is not an address", c.host)
	}
	u := base.ResolveReference(r)
	if u.Scheme != base.Scheme || u.Host != base.Host || u.User != nil {
		return "", fmt.Errorf("refused the endpoint %s named on another origin (%s://%s): the requests carry the server's credentials", c.host, u.Scheme, u.Host)
	}
	return u.String(), nil
}

// readSSEEvents calls each with the type and data of every event of the
// stream, until the stream ends (nil) or each or reading fails.
func (c *remoteConn) readSSEEvents(body io.Reader, each func(event string, data []byte) error) error {
	br := bufio.NewReaderSize(body, 64<<10)
	var data bytes.Buffer
	event, hasData := "", false
	for {
		line, err := readLine(br, c.max)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading events from %s: %w", c.host, err)
		}
		if len(line) == 0 { // end of an event
			if hasData {
				if err := each(event, data.Bytes()); err != nil {
					return err
				}
			}
			data.Reset()
			event, hasData = "", false
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			event = string(value)
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData = true
			if data.Len() > c.max {
				return fmt.Errorf("an event from %s is larger than the %d-byte message limit", c.host, c.max)
			}
		}
	}
}

// postSSE posts one frame to the endpoint; the answer comes on the stream.
func (c *remoteConn) postSSE(endpoint string, frame []byte, msgs []message) {
	resp, err := c.sendTo(c.ctx, http.MethodPost, endpoint, frame, func(h http.Header) {
		h.Set("Content-Type", "application/json")
	})
	if err != nil {
		if c.ctx.Err() == nil {
			c.answerFailed(msgs, err)
		}
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		c.answerFailed(msgs, c.statusError(resp))
		return
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
}
